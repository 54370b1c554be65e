"""The architecture rules, checked on the source so they stay true.

Imports run one way, memory ← bot ← adapters: ``memory/`` is the core and knows nothing of
the bot or the chat platforms; ``bot/`` is the application and never imports ``adapters/``
(the command line finds the platforms through entry points); ``adapters/`` translate
between a platform and the ``ChatService`` and never reach into ``bot.app``. No modules of
the three import one another in a circle. Storage that is not memory (settings, usage,
digests, owed replies, the outbox, backfill marks) lives in ``bot/stores``, not in
``memory/``. ``ChatService`` stays a thin pipeline (at most 8 public methods, no public
attributes, nothing read through it); modules stay small; tests share a harness, not each
other. Imports are read with ``ast`` (function-level ones included, relative ones
resolved), so a check reports each offending ``file:line``. The same holds one level up:
the packages of a layer (each sub-package, each module at its top) import one another one
way only, nothing in ``bot/`` imports its composition root (``bot.app``, ``bot.cli`` …)
from below, and ``benchmarks/`` has no circle either.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600  # a smoke alarm, not a target: split by concept, never to meet a count
LAYERS = ("memory", "bot", "adapters")  # each may import those before it, never after
MAX_BOT_MODULES = 3  # per adapter: the port (bot.platform) is what adapters use of bot
PLATFORM_LIBRARIES = ("discord", "slack", "slack_bolt", "slack_sdk")
PLATFORM_NAMES = frozenset({"discord", "slack", "console"})
PLATFORM_RULE_WORDS = PLATFORM_NAMES | {"dm"}  # compared with: a platform's rule
COMPOSITION_ROOT = ("bot/cli.py",)  # the command line chooses which platform it starts


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


def upward_imports(root: Path) -> list[str]:
    """Modules of a layer in ``LAYERS`` that import a later one: ``bot`` or ``memory``
    importing ``adapters``, ``memory`` importing ``bot``."""
    found = []
    for n, layer in enumerate(LAYERS):
        found += offending_imports(root, modules(root, layer), within(*LAYERS[n + 1:]))
    return found


def adapters_importing_bot_app(root: Path) -> list[str]:
    """Modules under ``adapters/`` that import ``bot.app``."""
    return offending_imports(root, modules(root, "adapters"), within("bot.app"))


def adapter_packages(root: Path) -> dict[str, list[Path]]:
    """Each adapter by name and its files: a package under ``adapters/`` is one adapter,
    the modules at the top of ``adapters/`` are the console's."""
    found: dict[str, list[Path]] = {"console": sorted((root / "adapters").glob("*.py"))}
    for package in sorted(p.parent for p in (root / "adapters").glob("*/__init__.py")):
        found[package.name] = sorted(package.rglob("*.py"))
    return found


def bot_modules_imported(root: Path, files: Iterable[Path]) -> set[str]:
    """The modules of ``bot`` that ``files`` import: each name resolved to the deepest
    module under ``bot/`` it names (``from bot import a`` is ``bot.a``, not ``bot``)."""
    known = {module_of(p, root) for p in modules(root, "bot")}
    found: set[str] = set()
    for path in files:
        by_line: dict[int, set[str]] = {}
        for line, name in imported_names(path, root):
            parts = name.split(".")
            module = next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                           if ".".join(parts[:n]) in known), None)
            if module is not None:
                by_line.setdefault(line, set()).add(module)
        for names in by_line.values():
            found |= {m for m in names if not any(o.startswith(f"{m}.") for o in names)}
    return found


def adapters_importing_much_of_bot(root: Path) -> list[str]:
    """Each adapter that imports more than ``MAX_BOT_MODULES`` modules of ``bot``."""
    found = []
    for name, files in adapter_packages(root).items():
        used = sorted(bot_modules_imported(root, files))
        if len(used) > MAX_BOT_MODULES:
            found.append(f"{name} imports {len(used)} bot modules (at most "
                         f"{MAX_BOT_MODULES}): {', '.join(used)}")
    return found


def adapters_past_the_port(root: Path) -> list[str]:
    """Modules under ``adapters/`` that import ``bot`` or ``memory`` other than through
    ``bot.platform`` (their own package, the standard library and third parties are theirs)."""
    def bad(name: str) -> bool:
        return within("bot", "memory")(name) and not within("bot.platform")(name)
    return offending_imports(root, modules(root, "adapters"), bad)


def platform_rules(root: Path) -> list[str]:
    """``file:line`` of each platform rule in the core (``bot/`` but its composition root,
    and ``memory/``): a comparison with a platform's name or key convention (``== "slack"``,
    ``== "dm"``), a ``platform`` compared with any text (``key.platform in ("irc",)``), a
    key's id read for meaning (``key.channel.startswith(...)``), a literal list or table of
    platform names, or one added to a list (``out.append("discord")``). The platforms answer
    these through ``bot.plugins`` (``is_direct``, ``is_trusted`` …)."""
    found = []
    for path in modules(root, "bot", "memory"):
        if path.relative_to(root).as_posix() in COMPOSITION_ROOT:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if _is_platform_rule(node):
                found.append(f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)} "
                             f"{ast.unparse(node)[:60]}")
    return found


def _is_platform_rule(node: ast.AST) -> bool:
    def words(nodes: Iterable[ast.AST]) -> set[str]:
        return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    def is_platform(n: ast.AST) -> bool:
        name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else ""
        return name.endswith("platform")
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        if any(map(is_platform, sides)):
            return any(words(ast.walk(side)) for side in sides)
        return bool(words(sides) & PLATFORM_RULE_WORDS)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return len(words(node.elts) & PLATFORM_NAMES) >= 2
    if isinstance(node, ast.Dict):
        return len(words(k for k in node.keys if k is not None) & PLATFORM_NAMES) >= 2
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method, receiver = node.func.attr, node.func.value
        if method in ("startswith", "endswith"):
            return isinstance(receiver, ast.Attribute) and receiver.attr in ("channel", "workspace")
        if method in ("append", "add", "insert"):
            return bool(words(node.args) & PLATFORM_NAMES)
    return False


def memory_importing_outward(root: Path) -> list[str]:
    """Modules under ``memory/`` that import ``bot``, ``adapters`` or a platform library."""
    outward = within("bot", "adapters", *PLATFORM_LIBRARIES)
    return offending_imports(root, modules(root, "memory"), outward)


OTHER_ROLES_TABLES = (
    "channel_settings", "settings_changes", "settings_version", "token_usage",
    "token_usage_kinds", "token_reservations", "digest_schedules", "digest_slots", "owed_replies",
    "outbox", "backfill_marks",
)
"""The tables of the storage roles that are not memory (``bot/stores``)."""
OTHER_ROLES_NAMES = re.compile(
    r"(?i)setting|usage|quota|owed|reply_?due|outbox|backfill_?mark|digest_?(schedule|slot)"
)
"""Classes and functions of those roles (``SqliteSettings``, ``claim_owed`` …)."""


def memory_holding_other_roles(root: Path) -> list[str]:
    """Modules under ``memory/`` that define a class or function of a storage role that is
    not memory, or name one of those roles' tables (in SQL, comments or docstrings)."""
    found = []
    tables = re.compile(rf"\b({'|'.join(OTHER_ROLES_TABLES)})\b")
    for path in modules(root, "memory"):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root)
        for node in ast.walk(ast.parse(text, filename=str(path))):
            defined = isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            if defined and OTHER_ROLES_NAMES.search(node.name):
                found.append(f"{where}:{node.lineno} defines {node.name}")
        for n, line in enumerate(text.splitlines(), 1):
            if (m := tables.search(line)) is not None:
                found.append(f"{where}:{n} names the table {m.group(1)}")
    return sorted(found)


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


def module_of(path: Path, root: Path) -> str:
    """The dotted module name of a file under ``root`` (a package is its ``__init__``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(root: Path, *packages: str) -> list[str]:
    """Each set of modules under ``packages`` that import one another in a circle (at any
    depth: a function-level import closes a circle too), as ``a ⇄ b ⇄ c``."""
    files = {module_of(p, root): p for p in modules(root, *packages)}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for _, imported in imported_names(path, root):
            parts = imported.split(".")
            target = next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                           if ".".join(parts[:n]) in files), None)
            if target is not None and target != name:
                graph[name].add(target)
    return [" ⇄ ".join(sorted(c)) for c in _circles(graph)]


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found, key=sorted)


# -- the rules on this repository -------------------------------------------------------------


def assert_none(violations: list[str]) -> None:
    """Fail listing every violation, one ``file:line`` a line."""
    assert not violations, "\n".join(["", *violations])


def test_imports_run_from_adapters_to_bot_to_memory() -> None:
    """No module under ``bot/`` imports ``adapters`` (not even the command line: platforms
    are entry points), none under ``memory/`` imports ``bot`` or ``adapters``."""
    assert_none(upward_imports(ROOT))


def test_adapters_do_not_import_the_app() -> None:
    """No module under ``adapters/`` imports ``bot.app``."""
    assert_none(adapters_importing_bot_app(ROOT))


def test_each_adapter_uses_bot_through_a_narrow_port() -> None:
    """Discord, Slack and the console each import at most ``MAX_BOT_MODULES`` modules of
    ``bot`` (``bot.platform``, the adapters' port, holds what they use)."""
    assert set(adapter_packages(ROOT)) == {"console", "discord", "slack"}
    assert_none(adapters_importing_much_of_bot(ROOT))


def test_the_port_count_finds_planted_violations(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "bot/__init__.py": "",
            **{f"bot/{m}.py": "" for m in ("a", "b", "c", "d", "platform")},
            "bot/pkg/__init__.py": "",
            "bot/pkg/deep.py": "",
            "adapters/__init__.py": "",
            "adapters/console.py": "from bot import a, b\nfrom bot.c import x\n",
            "adapters/chunks.py": "def f():\n    import bot.d\n",  # the console's 4th
            "adapters/irc/__init__.py": "from bot.platform import x, y\n",
            "adapters/irc/sub/z.py": "from bot.pkg.deep import q\nfrom bot import pkg\n",
            "adapters/irc/w.py": "from bot.platform import z\nfrom bot.pkg import deep\n",
        },
    )
    assert bot_modules_imported(tmp_path, adapter_packages(tmp_path)["irc"]) == {
        "bot.platform", "bot.pkg", "bot.pkg.deep"}
    assert adapters_importing_much_of_bot(tmp_path) == [
        "console imports 4 bot modules (at most 3): bot.a, bot.b, bot.c, bot.d"]


def test_adapters_import_bot_and_memory_only_through_the_port() -> None:
    """Every import of ``bot`` or ``memory`` under ``adapters/`` is ``bot.platform``: no
    ``memory.models``, no settings section, each comes re-exported by the port."""
    assert_none(adapters_past_the_port(ROOT))


def test_the_core_holds_no_platform_rules() -> None:
    """The core names no platform in a rule: which are configured, which keys are direct
    messages, who is the trusted operator at their terminal and the metrics' label set are
    answered by the platforms' entries."""
    assert_none(platform_rules(ROOT))


def test_the_port_and_rule_checks_find_planted_violations(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "bot/__init__.py": "",
            "bot/platform.py": "from memory.models import ChannelKey\n",
            "bot/quota.py": (
                "def direct(key):\n"
                "    return key.workspace == 'dm' or key.channel.startswith('D')\n"),
            "bot/metrics.py": "PLATFORMS = ('discord', 'slack', 'console')\n",
            "bot/settings.py": "def adapters(out):\n    out.append('slack')\n",
            "bot/access.py": (
                "def verdict(key, msg):\n"
                "    return key.platform == 'console' or msg.platform in ('irc',)\n"),
            "bot/limits.py": "RULES = {'slack': 1, 'console': 0}\n",
            "bot/cli.py": "def run(command, key):\n    return command == 'console'\n",
            "memory/__init__.py": "",
            "memory/models.py": "def owes(platform):\n    return platform != 'console'\n",
            "bot/fine.py": (
                "LIBS = frozenset({'discord', 'aiohttp'})\n"
                "def f(key, load):\n    return load('discord'), key.text.startswith('D')\n"),
            "adapters/__init__.py": "",
            "adapters/irc/__init__.py": (
                "import asyncio\nfrom bot.platform import ChannelKey\n"
                "from adapters.irc.text import x\n"),
            "adapters/irc/text.py": "from memory.models import Turn\n",
            "adapters/irc/web.py": "def f():\n    from bot.settings.sections import S\n",
        },
    )
    assert adapters_past_the_port(tmp_path) == [
        "adapters/irc/text.py:1 imports memory.models",
        "adapters/irc/web.py:2 imports bot.settings.sections"]
    assert sorted(platform_rules(tmp_path)) == [
        "bot/access.py:2 key.platform == 'console'",
        "bot/access.py:2 msg.platform in ('irc',)",
        "bot/limits.py:1 {'slack': 1, 'console': 0}",
        "bot/metrics.py:1 ('discord', 'slack', 'console')",
        "bot/quota.py:2 key.channel.startswith('D')",
        "bot/quota.py:2 key.workspace == 'dm'",
        "bot/settings.py:2 out.append('slack')",
        "memory/models.py:2 platform != 'console'"]


def test_memory_knows_nothing_of_bot_adapters_or_platforms() -> None:
    """No module under ``memory/`` imports ``bot``, ``adapters``, discord or slack libraries."""
    assert_none(memory_importing_outward(ROOT))


def test_memory_holds_no_storage_of_other_roles() -> None:
    """Channel settings, usage, digests, owed replies, the outbox and backfill marks are
    stored by ``bot/stores``, composed on the memory store: ``memory/`` defines none of
    their classes or functions and names none of their tables."""
    assert_none(memory_holding_other_roles(ROOT))


def test_modules_are_small() -> None:
    """No Python module in ``memory/``, ``bot/``, ``adapters/`` is over ``MAX_LINES`` lines."""
    assert_none(long_modules(ROOT))


def test_no_import_cycles() -> None:
    """No modules under ``bot/``, ``adapters/`` and ``memory/`` import one another in a
    circle (a platform's command table once imported its catch-up and config commands,
    which imported it back; owed replies and the service imported each other)."""
    assert_none(import_cycles(ROOT, *LAYERS))


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
            "bot/cli.py": "from adapters.console import run\n",
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
            "memory/stores/roles.py": (
                "class SqliteSettings:\n    async def claim_owed(self): ...\n"
                "def backfill(conn):  # the turn index's, memory's own\n"
                "    conn.execute('CREATE TABLE turns (seq)')\n"
                "    conn.execute('INSERT INTO owed_replies VALUES (1)')\n"
                "# outboxes and token_usage_by_day are other words\n"
            ),
            "tests/__init__.py": "",
            "tests/test_a.py": "from tests import helpers, test_b\n",
            "tests/test_b.py": "from .test_a import thing\nfrom tests.fakes import models\n",
            "tests/fakes/x.py": "import tests.test_b as b\nfrom ..test_a import y\n",
            "tests/fakes/y.py": "from tests.fakes.models import ScriptedModel\n",
            "adapters/chat/__init__.py": "",
            "adapters/chat/commands.py": "from adapters.chat.catchup import add\n",
            "adapters/chat/catchup.py": "def add():\n    from .commands import run\n",
            "adapters/chat/text.py": "from adapters.chat import commands\n",
            "adapters/lone.py": "from adapters.chat.text import x\nimport adapters.lone\n",
        },
    )
    assert upward_imports(tmp_path) == [
        "memory/sub/x.py:2 imports bot.llm",  # memory.botany is not bot: it only starts alike
        "bot/cli.py:1 imports adapters.console",  # the command line is no exception
        "bot/service.py:5 imports adapters",
    ]
    assert adapters_importing_bot_app(tmp_path) == [
        "adapters/slack.py:1 imports bot.app",
        "adapters/sub/deep.py:3 imports bot.app",
    ]
    assert memory_importing_outward(tmp_path) == [
        "memory/models.py:3 imports slack_sdk",
        "memory/store.py:1 imports discord.ext",
        "memory/sub/x.py:2 imports bot.llm",
    ]
    assert memory_holding_other_roles(tmp_path) == [
        "memory/stores/roles.py:1 defines SqliteSettings",
        "memory/stores/roles.py:2 defines claim_owed",
        "memory/stores/roles.py:5 names the table owed_replies",
    ]
    assert long_modules(tmp_path) == [f"bot/big.py:{MAX_LINES + 1} lines (at most {MAX_LINES})"]
    assert imports_of_test_modules(tmp_path) == [
        "tests/fakes/x.py:1 imports tests.test_b",
        "tests/fakes/x.py:2 imports tests.test_a",
        "tests/test_a.py:1 imports tests.test_b",
        "tests/test_b.py:1 imports tests.test_a",
    ]
    assert import_cycles(tmp_path, "adapters") == [
        "adapters.chat.catchup ⇄ adapters.chat.commands"]
    assert import_cycles(tmp_path, "memory") == []
    assert import_cycles(tmp_path, "memory", "bot", "adapters") == [
        "adapters.chat.catchup ⇄ adapters.chat.commands"]
    with pytest.raises(AssertionError, match=rf"bot/big\.py:{MAX_LINES + 1} lines"):
        assert_none(long_modules(tmp_path))


def test_the_cycle_check_covers_every_layer_and_crosses_them(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "bot/__init__.py": "",
            "bot/owed.py": "def later():\n    from bot.service import ChatService\n",
            "bot/service.py": "from bot import owed\n",
            "bot/alone.py": "from bot.service import ChatService\n",
            "memory/__init__.py": "",
            "memory/a.py": "from memory.b import x\n",
            "memory/b.py": "from . import c\n",
            "memory/c.py": "import memory.a\n",
            "adapters/__init__.py": "",
            "adapters/port.py": "from bot.service import ChatService\nfrom bot.hook import y\n",
            "bot/hook.py": "from bot import hook2\n",
            "bot/hook2.py": "from adapters import port\n",
        },
    )
    assert import_cycles(tmp_path, "memory", "bot", "adapters") == [
        "adapters.port ⇄ bot.hook ⇄ bot.hook2",
        "bot.owed ⇄ bot.service",
        "memory.a ⇄ memory.b ⇄ memory.c",
    ]
    assert import_cycles(tmp_path, "bot") == ["bot.owed ⇄ bot.service"]


# -- the service stays thin -------------------------------------------------------------------

MAX_SERVICE_METHODS = 8  # ChatService: receive a message, edits, deletes, backfill, identity…


def classes(root: Path, *packages: str) -> dict[str, ast.ClassDef]:
    """Every class defined under ``packages`` of ``root``, by name."""
    found: dict[str, ast.ClassDef] = {}
    for path in modules(root, *packages):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, node)
    return found


def public_methods(root: Path, name: str, *packages: str) -> list[str]:
    """The public methods of class ``name``, its own and those it inherits from classes
    defined under ``packages`` (a mixin counts: it is the same object)."""
    known = classes(root, *packages)
    methods: set[str] = set()
    todo, seen = [name], set()
    while todo:
        cls = known.get(todo.pop())
        if cls is None or cls.name in seen:
            continue
        seen.add(cls.name)
        methods |= {n.name for n in cls.body
                    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                    and not n.name.startswith("_")}
        todo += [b.id for b in cls.bases if isinstance(b, ast.Name)]
    assert seen, f"no class {name} under {packages}: the check would pass vacuously"
    return sorted(methods)


def test_chat_service_has_at_most_eight_public_methods() -> None:
    """Commands and reply delivery live in features and ``bot.reply_flow``, not here."""
    methods = public_methods(ROOT, "ChatService", "bot")
    assert len(methods) <= MAX_SERVICE_METHODS, methods


def test_the_service_checks_find_planted_violations(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "bot/__init__.py": "",
            "bot/service.py": "class ChatService(Mixin):\n"
                              "    def a(self): ...\n    async def b(self): ...\n"
                              "    def _c(self): ...\n",
            "bot/mixin.py": "class Mixin:\n    def d(self): ...\n",
        },
    )
    assert public_methods(tmp_path, "ChatService", "bot") == ["a", "b", "d"]


# -- packages: the floors of bot/ -------------------------------------------------------------

COMPOSITION_ROOT_MODULES = ("bot.__main__", "bot.cli", "bot.doctor", "bot.app", "bot.platform",
                            "bot.plugins")
"""The composition root: the command line, what wires the parts (``app``), the adapters' port,
the platforms' loader and ``doctor``, which builds the parts as the app does. Nothing else in
``bot/`` imports them: they are handed what they wire (docs/decisions/0048)."""


def unit_of(module: str) -> str | None:
    """The package-level unit of a dotted module: its sub-package of the top
    folder (``bot.catchup.since`` is ``bot.catchup``), or itself when it is a module at the
    top (``bot.app``). The top package's own ``__init__`` is no unit (None)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    return ".".join(parts[:2])


def package_imports(root: Path, top: str) -> dict[tuple[str, str], list[str]]:
    """``(unit, unit it imports)`` to the ``file:line imports name`` lines that make the
    arrow, for the units of ``top`` (sub-packages and top-level modules, see ``unit_of``);
    imports at any depth count, type-only ones too: they are dependencies all the same."""
    known = {module_of(p, root) for p in modules(root, top)}
    arrows: dict[tuple[str, str], list[str]] = {}
    for path in modules(root, top):
        source = unit_of(module_of(path, root))
        for line, name in imported_names(path, root):
            parts = name.split(".")
            target = next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                           if ".".join(parts[:n]) in known), None)
            unit = None if target is None else unit_of(target)
            if source is None or unit is None or unit == source:
                continue
            where = f"{path.relative_to(root)}:{line} imports {name}"
            found = arrows.setdefault((source, unit), [])
            if not any(w.startswith(f"{path.relative_to(root)}:{line} ") for w in found):
                found.append(where)
    return arrows


def two_way_packages(root: Path, top: str) -> list[str]:
    """Each pair of units of ``top`` that import each other, with the lines of both ways."""
    arrows = package_imports(root, top)
    return [f"{a} ⇄ {b}: {'; '.join(arrows[a, b])} || {'; '.join(arrows[b, a])}"
            for a, b in sorted(arrows) if a < b and (b, a) in arrows]


def package_cycles(root: Path, top: str) -> list[str]:
    """Each set of units of ``top`` that import one another in a circle, as ``a ⇄ b ⇄ c``."""
    graph: dict[str, set[str]] = {}
    for a, b in package_imports(root, top):
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    return [" ⇄ ".join(sorted(c)) for c in _circles(graph)]


def imports_of_the_root(root: Path, top: str = "bot",
                        composition: Iterable[str] = COMPOSITION_ROOT_MODULES) -> list[str]:
    """Modules of ``top`` outside the composition root that import a module of it."""
    wired = tuple(composition)
    below = [p for p in modules(root, top) if not within(*wired)(module_of(p, root))]
    return offending_imports(root, below, within(*wired))


@pytest.mark.parametrize("top", LAYERS)
def test_no_two_packages_import_each_other(top: str) -> None:
    """No two packages of ``bot/`` (a sub-package, or a module at its top), nor of
    ``memory/`` or ``adapters/``, import each other, in either direction, at any depth: a
    shared piece goes to the lower one."""
    assert_none(two_way_packages(ROOT, top))


@pytest.mark.parametrize("top", LAYERS)
def test_the_packages_stand_on_floors(top: str) -> None:
    """The packages of each layer import one another without a circle of any length, so
    each stands on a floor above everything it imports (docs/decisions/0048 names the
    floors of ``bot/``)."""
    assert_none(package_cycles(ROOT, top))


def test_nothing_below_the_composition_root_imports_it() -> None:
    """No module of ``bot/`` but the composition root's own imports ``bot.app``, ``bot.cli``,
    ``bot.plugins``, ``bot.platform``, ``bot.doctor`` or ``bot.__main__``: the root hands
    the parts what they need (the admin server is handed the runtime's parts)."""
    for name in COMPOSITION_ROOT_MODULES:
        assert (ROOT / Path(*name.split("."))).with_suffix(".py").is_file(), name
    assert_none(imports_of_the_root(ROOT))


def test_the_benchmarks_import_one_another_without_a_circle() -> None:
    """No modules under ``benchmarks/`` import one another in a circle (the entry point and a
    scenario once shared the fake model server through ``benchmarks.__main__``)."""
    assert_none(import_cycles(ROOT, "benchmarks"))


def test_the_package_checks_find_planted_violations(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "bot/__init__.py": "",
            "bot/app.py": "from bot.feed import x\nfrom bot import words\n",
            "bot/words.py": "",  # a module at the top is a unit of its own
            "bot/feed/__init__.py": "from bot.feed.inner import y\n",  # inside: no arrow
            "bot/feed/inner.py": "from bot.words import z\n",
            "bot/feed/deep/late.py": "def f():\n    from ...app import Runtime\n",
            "bot/catch/__init__.py": "",
            "bot/catch/a.py": "from bot.cmds import table\n",
            "bot/cmds/__init__.py": "",
            "bot/cmds/table.py": "from typing import TYPE_CHECKING\n"
                                 "if TYPE_CHECKING:\n    from bot.catch.a import Args\n",
            "bot/one/__init__.py": "import bot.two.x\n",
            "bot/two/x.py": "from bot import three\n",
            "bot/three/__init__.py": "from bot.one import q\n",
            "bot/cli.py": "from bot import app\n",
            "bot/__main__.py": "from bot.cli import main\n",
        },
    )
    assert two_way_packages(tmp_path, "bot") == [
        "bot.app ⇄ bot.feed: bot/app.py:1 imports bot.feed || "
        "bot/feed/deep/late.py:2 imports bot.app",
        "bot.catch ⇄ bot.cmds: bot/catch/a.py:1 imports bot.cmds || "
        "bot/cmds/table.py:3 imports bot.catch.a",  # a type-only import is an arrow too
    ]
    assert package_cycles(tmp_path, "bot") == [
        "bot.app ⇄ bot.feed",
        "bot.catch ⇄ bot.cmds",
        "bot.one ⇄ bot.three ⇄ bot.two",
    ]
    assert imports_of_the_root(tmp_path, composition=("bot.app", "bot.cli", "bot.__main__")) == [
        "bot/feed/deep/late.py:2 imports bot.app"]
    with pytest.raises(AssertionError, match=r"bot\.catch ⇄ bot\.cmds"):
        assert_none(two_way_packages(tmp_path, "bot"))


def test_the_benchmark_check_finds_a_planted_circle(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "benchmarks/__init__.py": "",
            "benchmarks/__main__.py": "from benchmarks.grouped import run\n",
            "benchmarks/grouped.py": "def run():\n    from benchmarks.__main__ import fake\n",
            "benchmarks/common.py": "",
            "benchmarks/scale.py": "from benchmarks import common\n",
        },
    )
    assert import_cycles(tmp_path, "benchmarks") == [
        "benchmarks.__main__ ⇄ benchmarks.grouped"]


# -- nobody reaches through the service ----------------------------------------------------------

SERVICE_HANDLES = frozenset({"service", "_service"})  # what code calls a ChatService it holds


def service_attributes(root: Path) -> list[str]:
    """The public attributes of ``ChatService`` that are not methods: ``self.x = …`` in
    its methods, a class-level field, a property. Its parts are its own; what the
    platforms and the commands use is handed to them (``bot.features``)."""
    cls = classes(root, "bot").get("ChatService")
    assert cls is not None, "no class ChatService under bot/: the check would pass vacuously"
    found = []
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            for t in ast.walk(target):
                if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                        and t.value.id == "self" and not t.attr.startswith("_")):
                    found.append(f"ChatService.{t.attr} (line {t.lineno})")
                elif isinstance(t, ast.Name) and node in cls.body and not t.id.startswith("_"):
                    found.append(f"ChatService.{t.id} (line {t.lineno})")
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                isinstance(d, ast.Name) and d.id in ("property", "cached_property")
                for d in node.decorator_list) and not node.name.startswith("_"):
            found.append(f"ChatService.{node.name} (line {node.lineno}, a property)")
    return sorted(set(found))


def reads_through_the_service(root: Path, *packages: str) -> list[str]:
    """``file:line`` wherever code outside the module defining ``ChatService`` reads
    anything but one of its public methods off something it calls ``service``
    (``rt.service.quota``, ``service._memory``, ``ctx.service.channels``)."""
    methods = set(public_methods(root, "ChatService", "bot"))
    found: list[tuple[str, int, str]] = []
    for path in modules(root, *packages):
        text = path.read_text(encoding="utf-8")
        if re.search(r"^class ChatService\b", text, re.MULTILINE):
            continue
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if not isinstance(node, ast.Attribute) or node.attr in methods:
                continue
            held = node.value
            name = (held.id if isinstance(held, ast.Name)
                    else held.attr if isinstance(held, ast.Attribute) else "")
            if name in SERVICE_HANDLES:
                found.append((str(path.relative_to(root)), node.lineno, f"{name}.{node.attr}"))
    return [f"{where}:{line}: {what}" for where, line, what in sorted(found)]


def test_chat_service_has_no_public_attributes() -> None:
    """Only methods: the memory, the model, the quota, the outbox… are its own."""
    assert_none(service_attributes(ROOT))


def test_nobody_reaches_through_the_service() -> None:
    """The platforms, the commands, the benchmarks and the tests call the service's methods
    and take the parts they need from ``Features`` (``bot.features``), never through it."""
    assert_none(reads_through_the_service(ROOT, "bot", "adapters", "benchmarks", "tests"))


def test_the_reach_checks_find_planted_violations(tmp_path: Path) -> None:
    plant(
        tmp_path,
        {
            "bot/__init__.py": "",
            "bot/service.py": "class ChatService:\n"
                              "    limit: int = 3\n"
                              "    def __init__(self, quota):\n"
                              "        self._quota, self.outbox = quota, None\n"
                              "        self._rate = 1\n"
                              "    @property\n    def memory(self): ...\n"
                              "    async def receive(self, msg):\n"
                              "        return self._quota, self.outbox\n",
            "adapters/a.py": "async def run(service, rt, ctx):\n"
                             "    await service.receive(1)\n"
                             "    rt.service.outbox.send()\n"
                             "    service._quota.bill()\n"
                             "    ctx.service.receive\n"
                             "    x = rt._service._rate\n"
                             "    return rt.features.outbox\n",
        },
    )
    assert service_attributes(tmp_path) == [
        "ChatService.limit (line 2)", "ChatService.memory (line 7, a property)",
        "ChatService.outbox (line 4)"]
    assert reads_through_the_service(tmp_path, "bot", "adapters") == [
        "adapters/a.py:3: service.outbox", "adapters/a.py:4: service._quota",
        "adapters/a.py:6: _service._rate"]
    plant(tmp_path, {"bot/service.py": "class ChatService:\n"
                                       "    def receive(self, msg):\n        self._x = msg\n"})
    assert service_attributes(tmp_path) == []
