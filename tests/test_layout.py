"""The architecture rules, checked on the source so they stay true.

``memory/`` is the core and knows nothing of the bot or the chat platforms; ``bot/`` is the
application and reaches the platform adapters only from its command line (``bot/cli.py``);
``adapters/`` translate between a platform and the ``ChatService`` and never reach into
``bot.app``; modules stay small; tests share a harness, not each other. Imports are read
with ``ast`` (function-level ones included, relative ones resolved), so a check reports
each offending ``file:line``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600  # a smoke alarm, not a target: split by concept, never to meet a count
PLATFORM_LIBRARIES = ("discord", "slack", "slack_bolt", "slack_sdk")


def modules(root: Path, *packages: str) -> Iterator[Path]:
    """Every Python file under the given top-level folders of ``root``, recursively."""
    for package in packages:
        assert (root / package).is_dir(), f"no {package}/ in {root}: a check would pass vacuously"
        yield from sorted((root / package).rglob("*.py"))


def imported_names(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """``(line, dotted name)`` for everything ``path`` imports, at any depth.

    ``from a.b import c`` yields both ``a.b`` and ``a.b.c`` (``c`` may be a module), and a
    relative import is resolved against the file's package under ``root``.
    """
    package = list(path.relative_to(root).parent.parts)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            parts = package[: len(package) - node.level + 1] if node.level else []
            base = ".".join([*parts, *([node.module] if node.module else [])])
            if base:
                yield node.lineno, base
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}" if base else alias.name


def within(*modules: str) -> Callable[[str], bool]:
    """Whether a dotted name is one of ``modules`` or inside one of them."""
    return lambda name: any(name == m or name.startswith(f"{m}.") for m in modules)


def offending_imports(root: Path, files: Iterable[Path], bad: Callable[[str], bool]) -> list[str]:
    """``file:line imports name`` for each line of ``files`` that imports a ``bad`` name."""
    found: dict[tuple[Path, int], str] = {}  # the first offending name of each line
    for path in files:
        for line, name in imported_names(path, root):
            if bad(name):
                found.setdefault((path, line), f"{path.relative_to(root)}:{line} imports {name}")
    return list(found.values())


# -- the checks, as functions of a source tree ------------------------------------------------


def bot_importing_adapters(root: Path) -> list[str]:
    """Modules under ``bot/`` other than ``bot/cli.py`` that import ``adapters``."""
    files = (p for p in modules(root, "bot") if p != root / "bot" / "cli.py")
    return offending_imports(root, files, within("adapters"))


def adapters_importing_bot_app(root: Path) -> list[str]:
    """Modules under ``adapters/`` that import ``bot.app``."""
    return offending_imports(root, modules(root, "adapters"), within("bot.app"))


def memory_importing_outward(root: Path) -> list[str]:
    """Modules under ``memory/`` that import ``bot``, ``adapters`` or a platform library."""
    outward = within("bot", "adapters", *PLATFORM_LIBRARIES)
    return offending_imports(root, modules(root, "memory"), outward)


def long_modules(root: Path) -> list[str]:
    """Python modules under ``memory/``, ``bot/``, ``adapters/`` over ``MAX_LINES`` lines."""
    found = []
    for path in modules(root, "memory", "bot", "adapters"):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(root)}:{lines} lines (at most {MAX_LINES})")
    return found


def is_test_module(name: str) -> bool:
    """Whether ``name`` is a test module: ``tests.test_x`` (at any depth) or ``test_x``."""
    parts = name.split(".")
    if parts[0] == "tests":
        return any(p.startswith("test_") for p in parts[1:])
    return parts[0].startswith("test_")


def imports_of_test_modules(root: Path) -> list[str]:
    """Modules under ``tests/`` that import a test module (``tests.test_*``,
    ``from tests import test_*``, or relatively)."""
    return offending_imports(root, modules(root, "tests"), is_test_module)


# -- the rules on this repository -------------------------------------------------------------


def assert_none(violations: list[str]) -> None:
    """Fail listing every violation, one ``file:line`` a line."""
    assert not violations, "\n".join(["", *violations])


def test_bot_reaches_adapters_only_from_the_cli() -> None:
    """No module under ``bot/`` except ``bot/cli.py`` imports from ``adapters``."""
    assert_none(bot_importing_adapters(ROOT))


def test_adapters_do_not_import_the_app() -> None:
    """No module under ``adapters/`` imports ``bot.app``."""
    assert_none(adapters_importing_bot_app(ROOT))


def test_memory_knows_nothing_of_bot_adapters_or_platforms() -> None:
    """No module under ``memory/`` imports ``bot``, ``adapters``, discord or slack libraries."""
    assert_none(memory_importing_outward(ROOT))


def test_modules_are_small() -> None:
    """No Python module in ``memory/``, ``bot/``, ``adapters/`` is over ``MAX_LINES`` lines."""
    assert_none(long_modules(ROOT))


def test_tests_do_not_import_each_other() -> None:
    """No module under ``tests/`` imports a test module (``tests.test_*``)."""
    assert_none(imports_of_test_modules(ROOT))


# -- the checker itself -----------------------------------------------------------------------


def plant(root: Path, files: dict[str, str]) -> None:
    """Write ``files`` (relative path to text) under ``root``."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checks_find_planted_violations(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "bot/__init__.py": "",
            "bot/cli.py": "from adapters.console import run\n",  # allowed
            "bot/service.py": "import os\n\n\ndef f():\n    from adapters import discord\n",
            "bot/big.py": "x = 1\n" * (MAX_LINES + 1),
            "bot/ok.py": "x = 1\n" * MAX_LINES,
            "adapters/__init__.py": "",
            "adapters/slack.py": "from bot import app\nfrom bot.service import ChatService\n",
            "adapters/sub/deep.py": "class A:\n    def f(self):\n        import bot.app as a\n",
            "adapters/sub/ok.py": "from ..slack import x\nfrom bot.application import y\n",
            "memory/__init__.py": "",
            "memory/store.py": "import discord.ext\nfrom . import models\n",
            "memory/models.py": "from memory.botany import x\nif 1:\n    import slack_sdk\n",
            "memory/sub/x.py": "from .. import adapters\nfrom bot.llm import LLM\n",
            "tests/__init__.py": "",
            "tests/test_a.py": "from tests import helpers, test_b\n",
            "tests/test_b.py": "from .test_a import thing\nfrom tests.fakes import models\n",
            "tests/fakes/x.py": "import tests.test_b as b\nfrom ..test_a import y\n",
            "tests/fakes/y.py": "from tests.fakes.models import ScriptedModel\n",
        },
    )
    assert bot_importing_adapters(tmp_path) == ["bot/service.py:5 imports adapters"]
    assert adapters_importing_bot_app(tmp_path) == [
        "adapters/slack.py:1 imports bot.app",
        "adapters/sub/deep.py:3 imports bot.app",
    ]
    assert memory_importing_outward(tmp_path) == [
        "memory/models.py:3 imports slack_sdk",
        "memory/store.py:1 imports discord.ext",
        "memory/sub/x.py:2 imports bot.llm",
    ]
    assert long_modules(tmp_path) == [f"bot/big.py:{MAX_LINES + 1} lines (at most {MAX_LINES})"]
    assert imports_of_test_modules(tmp_path) == [
        "tests/fakes/x.py:1 imports tests.test_b",
        "tests/fakes/x.py:2 imports tests.test_a",
        "tests/test_a.py:1 imports tests.test_b",
        "tests/test_b.py:1 imports tests.test_a",
    ]
    with pytest.raises(AssertionError, match=rf"bot/big\.py:{MAX_LINES + 1} lines"):
        assert_none(long_modules(tmp_path))
