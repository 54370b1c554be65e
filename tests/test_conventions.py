"""Conventions checked on the source: docs where they belong, slow tests marked ``slow``.

Product docstrings say what and why in a few lines: no files outside the repository, no
benchmark history or issue numbers (those go to ``docs/decisions/``), module docstrings of
at most ``MAX_DOCSTRING_LINES``. A test that starts a process or a pseudo-terminal carries
the ``slow`` marker, so ``pytest -m "not slow"`` stays quick. A product function is at
most ``MAX_FUNCTION_LINES`` long (split by what it does), unless ``LONG_FUNCTIONS`` names it.
Each checker takes the repository root, so ``test_the_checks_find_planted_violations`` can
prove it fails.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("bot", "memory", "adapters")
MAX_DOCSTRING_LINES = 20
OUTSIDE_FILES = re.compile(r"\b(?:DESIGN|STYLE)(?:\.md\b|\s*§|:)")
HISTORY = re.compile(
    r"(?i)\bscenario\s*\d"  # benchmark runs ("scenario 1's views read ~240 neighbours")
    r"|\bissues?\s*#?\d"  # issue numbers
    r"|benchmarks/results/"  # a result file quoted as the reason
    r"|\bruns?\s+#?\d"  # run numbers
)
# Files another change is rewriting at the same time; their docs are fixed there. Each entry
# names the rule it is excused from, and an entry no longer needed fails the test, so the
# list only shrinks.
EXCUSED: set[tuple[str, str]] = set()

MAX_FUNCTION_LINES = 50
# Product functions longer than that, as ``file:Class.function``: each is being split by
# another change or kept for a reason a decision record gives. An entry no longer needed
# fails the test, so the list only shrinks.
LONG_FUNCTIONS: set[str] = set()

# What starts a process or a pseudo-terminal, as a name or an attribute in a test's body.
# (Playwright's entry points start a browser process.)
SPAWNS = frozenset({"create_subprocess_exec", "create_subprocess_shell", "subprocess", "Popen",
                    "pexpect", "pty", "openpty", "async_playwright", "sync_playwright"})


def product_files(root: Path) -> Iterator[Path]:
    for package in PRODUCT:
        assert (root / package).is_dir(), f"no {package}/ in {root}: a check would pass vacuously"
        yield from sorted((root / package).rglob("*.py"))


def doc_violations(root: Path) -> list[tuple[str, str, str]]:
    """``(file, rule, where)`` for each product file that breaks a documentation rule."""
    found: list[tuple[str, str, str]] = []
    for path in product_files(root):
        name = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_FILES.search(line):
                found.append((name, "outside", f"{name}:{number}: {line.strip()}"))
            if HISTORY.search(line):
                found.append((name, "history", f"{name}:{number}: {line.strip()}"))
        doc = ast.get_docstring(ast.parse(text), clean=False) or ""
        if len(doc.splitlines()) > MAX_DOCSTRING_LINES:
            found.append((name, "docstring", f"{name}: {len(doc.splitlines())} lines"))
    return found


def unexcused(found: list[tuple[str, str, str]]) -> list[str]:
    return [where for name, rule, where in found if (name, rule) not in EXCUSED]


def long_functions(root: Path) -> dict[str, int]:
    """``file:Class.function`` → its lines (decorators left out), for each product function,
    nested or a method, over ``MAX_FUNCTION_LINES``."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, name: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualified = prefix + child.name
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and length > MAX_FUNCTION_LINES:
                    found[f"{name}:{qualified}"] = length
                visit(child, name, qualified + ".")

    for path in product_files(root):
        visit(ast.parse(path.read_text(encoding="utf-8")), path.relative_to(root).as_posix(), "")
    return found


def _is_slow_mark(node: ast.expr) -> bool:
    """``pytest.mark.slow`` (or ``mark.slow``), alone or in a list/tuple of marks."""
    if isinstance(node, ast.List | ast.Tuple):
        return any(_is_slow_mark(e) for e in node.elts)
    return isinstance(node, ast.Attribute) and node.attr == "slow" and (
        (isinstance(node.value, ast.Attribute) and node.value.attr == "mark")
        or (isinstance(node.value, ast.Name) and node.value.id == "mark"))


def _module_marked(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Assign) and _is_slow_mark(node.value)
               and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
               for node in tree.body)


def _used_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names and attributes a function's body uses, and its parameters (fixtures); not its
    annotations, so a helper typed ``asyncio.subprocess.Process`` does not count."""
    names = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
    return names


def _functions(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """Every function of a module with whether an enclosing class is marked slow."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node, False
        elif isinstance(node, ast.ClassDef):
            marked = any(_is_slow_mark(d) for d in node.decorator_list) or any(
                isinstance(s, ast.Assign) and _is_slow_mark(s.value) for s in node.body)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield item, marked


def spawning(functions: dict[str, set[str]], known: set[str]) -> set[str]:
    """The names of ``functions`` (name → names used) that use a spawning name, directly or
    through another of them: the fixed point."""
    found = set(known)
    while True:
        more = {name for name, used in functions.items() if used & found} - found
        if not more:
            return found
        found |= more


def _top_level_uses(tree: ast.Module) -> dict[str, set[str]]:
    """A module's top-level functions and classes with the names their bodies use (a
    class: all its methods')."""
    used: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            used.setdefault(node.name, set()).update(_used_names(node))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    used.setdefault(node.name, set()).update(_used_names(item))
    return used


def support_spawners(root: Path) -> dict[str, set[str]]:
    """Per module of the shared test code (``tests.harness.*``, ``tests.fakes.*``,
    ``tests.conftest``), its functions and classes that start processes: a test that
    imports and uses one (or takes a conftest fixture that does) spawns too."""
    found: dict[str, set[str]] = {}
    files = [*sorted((root / "tests").glob("harness/*.py")),
             *sorted((root / "tests").glob("fakes/*.py")), root / "tests" / "conftest.py"]
    for path in files:
        if path.exists():
            used = _top_level_uses(ast.parse(path.read_text(encoding="utf-8")))
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            found[module] = spawning(used, set(SPAWNS)) - set(SPAWNS)
    return found


def unmarked_spawning_tests(root: Path) -> list[str]:
    """``file::test`` for each test that starts a process (itself, through a helper or
    fixture of its module, or through shared test code) without the ``slow`` marker."""
    support = support_spawners(root)
    found: list[str] = []
    for path in sorted((root / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if _module_marked(tree):
            continue
        known = set(SPAWNS) | support.get("tests.conftest", set())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in support:
                known |= {a.asname or a.name for a in node.names
                          if a.name in support[node.module]}
        functions = list(_functions(tree))
        reach = spawning({fn.name: _used_names(fn) for fn, _ in functions}, known)
        for fn, class_marked in functions:
            if (fn.name.startswith("test") and fn.name in reach and not class_marked
                    and not any(_is_slow_mark(d) for d in fn.decorator_list)):
                found.append(f"{path.relative_to(root).as_posix()}::{fn.name}")
    return found


# ----------------------------------------------------------------------------------- checks


def test_product_docs_name_no_outside_files_history_or_long_module_docstrings() -> None:
    found = doc_violations(ROOT)
    assert unexcused(found) == []
    stale = EXCUSED - {(name, rule) for name, rule, _ in found}
    assert not stale, f"no longer needed, remove from EXCUSED: {sorted(stale)}"


def test_tests_that_start_processes_are_marked_slow() -> None:
    assert unmarked_spawning_tests(ROOT) == []


def test_product_functions_are_short_or_listed() -> None:
    found = long_functions(ROOT)
    assert {name: n for name, n in found.items() if name not in LONG_FUNCTIONS} == {}
    stale = LONG_FUNCTIONS - set(found)
    assert not stale, f"no longer needed, remove from LONG_FUNCTIONS: {sorted(stale)}"


def plant(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_the_checks_find_planted_violations(tmp_path: Path) -> None:
    long_doc = '"""' + "line\n" * (MAX_DOCSTRING_LINES + 1) + '"""\n'
    plant(tmp_path, {
        "bot/a.py": '"""Why: see DESIGN.md, memory semantics 3."""\n',
        "memory/b.py": "# scenario 1's views read ~240 neighbours (issue 13)\n",
        "adapters/c.py": long_doc,
        "adapters/ok.py": '"""Orders like ``#88`` or ``order 48213`` are identifiers."""\n',
        "memory/long.py": "class A:\n    def f(self):\n" + "        x = 1\n" * 49
                          + "\n    @property\n    def g(self):\n" + "        x = 1\n" * 50
                          + "\n\ndef h():\n    def inner():\n" + "        x = 1\n" * 50,
        "tests/harness/proc.py": "import subprocess\n\ndef run_child():\n"
                                 "    return subprocess.run(['true'])\n",
        "tests/test_direct.py": "import pexpect\n\ndef test_a():\n    pexpect.spawn('x')\n\n"
                                "def test_quick():\n    assert 1\n",
        "tests/test_helper.py": "import asyncio, pytest\n\nasync def helper():\n"
                                "    await asyncio.create_subprocess_exec('x')\n\n"
                                "@pytest.fixture\nasync def child():\n    await helper()\n\n"
                                "async def test_b(child):\n    pass\n\n"
                                "@pytest.mark.slow\nasync def test_c():\n    await helper()\n",
        "tests/test_harness_user.py": "from tests.harness.proc import run_child\n\n"
                                      "def test_d():\n    run_child()\n",
        "tests/test_marked.py": "import pytest, subprocess\n\npytestmark = [pytest.mark.slow]\n\n"
                                "def test_e():\n    subprocess.run(['true'])\n",
        "tests/test_typed.py": "import asyncio\n\n"
                               "def test_f(p: asyncio.subprocess.Process) -> None:\n    pass\n",
    })
    assert sorted((n, r) for n, r, _ in doc_violations(tmp_path)) == [
        ("adapters/c.py", "docstring"), ("bot/a.py", "outside"), ("memory/b.py", "history")]
    assert long_functions(tmp_path) == {"memory/long.py:A.g": 51, "memory/long.py:h": 52,
                                        "memory/long.py:h.inner": 51}
    assert unmarked_spawning_tests(tmp_path) == [
        "tests/test_direct.py::test_a", "tests/test_harness_user.py::test_d",
        "tests/test_helper.py::test_b"]
