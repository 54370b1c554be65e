"""``python -m benchmarks.docs_numbers [--check]``: the documentation's benchmark numbers,
written from the latest results files.

A document marks a generated block with ``<!-- results:NAME -->`` … ``<!-- /results:NAME
-->``; this writes, between the markers, the table rendered from
``benchmarks/results/NAME.md`` (today: ``longmem``, scenario 6). ``--check`` writes nothing
and exits 1 naming each block that differs from what the results file gives, so a new run
cannot leave old numbers in the docs (``tests/test_docs_numbers.py`` runs the check).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["DOCS", "RENDERERS", "check", "longmem_table", "render", "table_rows", "update"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = [ROOT / "docs" / "performance.md", ROOT / "README.md"]
_BLOCK = re.compile(r"(<!-- results:(\w+) -->\n)(.*?)(<!-- /results:\2 -->)", re.DOTALL)


def table_rows(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the first markdown table in ``text`` whose header starts with
    ``| first_header |``, as header -> cell."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"| {first_header} |"):
            header = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(header, (c.strip() for c in row.strip("|").split("|")),
                                     strict=True)))
            return rows
    raise ValueError(f"no table with a {first_header!r} column")


def _line(pattern: str, text: str) -> str:
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1) if m else "?"


def _pct(cell: str) -> str:
    return f"{float(cell):.1f}%" if cell not in ("", "nan", "–") else "–"


def longmem_table(results: str) -> str:
    """Scenario 6 from ``longmem.md``: each method and budget, both measures, by kind."""
    rows = table_rows(results, "method")
    kinds = [h.removeprefix("evidence % ") for h in rows[0] if h.startswith("evidence % ")]
    out = [
        f"From [longmem.md](../benchmarks/results/longmem.md) ({_line(r'^Machine: (.*)$', results)}"
        f" Command: {_line(r'^Command: (.*)$', results)})",
        "",
        "| method | memory budget | evidence turns in prompt | evidence, 60% of its words | "
        "answer in prompt | mean tokens | over budget | "
        + " | ".join(f"evidence turns, {k}" for k in kinds) + " |",
        "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(kinds),
    ]
    for r in rows:
        cells = [r["method"], r["budget"], _pct(r["evidence in prompt %"]),
                 _pct(r.get("evidence 60% of words %", "–")), _pct(r["answer in prompt %"]),
                 r["mean tokens"], r["over budget"],
                 *(_pct(r[f"evidence % {k}"]) for k in kinds)]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


RENDERERS: dict[str, Callable[[str], str]] = {"longmem": longmem_table}


def render(doc: str, results: Path = RESULTS) -> str:
    """``doc`` with every generated block rewritten from its results file."""
    def block(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in RENDERERS:
            raise ValueError(f"no renderer for results:{name}")
        body = RENDERERS[name]((results / f"{name}.md").read_text(encoding="utf-8"))
        return m.group(1) + body + m.group(4)

    return _BLOCK.sub(block, doc)


def check(paths: Sequence[Path], results: Path = RESULTS) -> list[str]:
    """The generated blocks (``path: results:NAME``) that differ from their results file."""
    stale = []
    for path in paths:
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        fresh = render(text, results)
        for old, new in zip(_BLOCK.finditer(text), _BLOCK.finditer(fresh), strict=True):
            if old.group(3) != new.group(3):
                stale.append(f"{path.name}: results:{old.group(2)}")
    return stale


def update(paths: Sequence[Path], results: Path = RESULTS) -> list[Path]:
    """Rewrite the generated blocks of ``paths``; return the files that changed."""
    changed = []
    for path in paths:
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        fresh = render(text, results)
        if fresh != text:
            path.write_text(fresh, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.docs_numbers",
                                description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only report stale blocks (exit 1)")
    a = p.parse_args(argv)
    if a.check:
        stale = check(DOCS)
        for s in stale:
            print(f"stale: {s} (run python -m benchmarks.docs_numbers)")
        sys.exit(1 if stale else 0)
    for path in update(DOCS):
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
