"""``docs/failure-modes.md`` stays true: every boundary has its row, every failure class its
column, and every test a cell names exists (a parametrized case by its id; a test of a
shared contract by its class, ``tests/test_x.py::TestClass::test_y``)."""

from __future__ import annotations

import importlib
import inspect
import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "docs" / "failure-modes.md"
COLUMNS = ("boundary", "before", "lost answer", "429", "slow", "killed", "concurrent",
           "rejected", "hostile")
BOUNDARIES = (
    "platform post: reply", "platform post: placeholder", "platform update",
    "platform post: chunks", "platform delete", "platform post: scheduled digest",
    "platform post: public catch-up", "file download", "file extraction",
    "model call: reply", "model call: summary", "model call: image description",
    "model call: catch-up", "model call: admission", "database commit", "scheduler claim",
    "platform read: a referenced Discord message", "platform read: a Slack thread",
    "access lists", "read check", "database commit: a personal note",
)
NAMED = re.compile(r"`(tests/[\w/]+\.py)::((?:Test\w+::)?test_\w+)(?:\[([^\]]+)\])?`")
ANY_NAMED = re.compile(r"`tests/[\w/]+\.py::[^`]*`")


def table() -> list[list[str]]:
    """The catalog's table, one list of cells per line (header first, separator dropped)."""
    lines = [line for line in CATALOG.read_text(encoding="utf-8").splitlines()
             if line.startswith("|")]
    rows = [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in lines]
    return [row for row in rows if not set("".join(row)) <= set("-| ")]


def case_ids(test: Callable[..., Any]) -> set[str] | None:
    """The ids pytest gives the cases of a parametrized test (None: not parametrized)."""
    marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
    if not marks:
        return None
    per_mark = []
    for mark in marks:  # the decorator nearest the function comes first, as in the ids
        ids = mark.kwargs.get("ids")
        per_mark.append([str(i) for i in ids] if ids else [str(v) for v in mark.args[1]])
    return {"-".join(parts) for parts in itertools.product(*per_mark)}


def test_every_boundary_has_a_row_and_every_class_a_column() -> None:
    header, *rows = table()
    assert tuple(header) == COLUMNS
    assert all(len(row) == len(COLUMNS) for row in rows), [r[0] for r in rows
                                                          if len(r) != len(COLUMNS)]
    firsts = [row[0] for row in rows]
    missing = [b for b in BOUNDARIES if not any(f.startswith(b) for f in firsts)]
    assert not missing, f"boundaries without a row: {missing}"
    assert all(all(cell for cell in row) for row in rows), "an empty cell"
    open_cells = [row[0] for row in rows if any("—" in cell for cell in row)]
    assert not open_cells, f"a cell promising nothing (name a test, n/a, not covered): {open_cells}"


def resolve(path: str, name: str) -> Any:
    """The test function ``path::name`` names (``name``: ``test_y`` or ``TestClass::test_y``),
    or None."""
    found: Any = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    for part in name.split("::"):
        found = getattr(found, part, None)
    return found


def test_every_test_the_catalog_names_exists() -> None:
    text = CATALOG.read_text(encoding="utf-8")
    named = NAMED.findall(text)
    assert len(named) > 50
    unread = [m for m in ANY_NAMED.findall(text) if not NAMED.fullmatch(m)]
    assert not unread, f"names of tests this check cannot read: {unread}"
    missing = []
    for path, name, case in set(named):
        test = resolve(path, name)
        if not inspect.isfunction(test):
            missing.append(f"{path}::{name}")
            continue
        if case and case not in (case_ids(test) or set()):
            missing.append(f"{path}::{name}[{case}]")
    assert not missing, f"tests the catalog names that do not exist: {sorted(missing)}"
