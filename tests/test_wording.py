"""What people read says what people say: "messages", not "turns"; "kept", not "carried"
(the data model keeps its names: ``Turn``, ``CarriedIdentifier``). The strings of the
modules that print to a person (the shell commands, the chat commands, the console, the
adapters, the memory inspector's pages) are scanned, log lines and docstrings aside. And the
documentation speaks of the product, never of the sessions that built it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTERNAL = re.compile(r"\bturns?\b|\bcarried\b", re.IGNORECASE)
HISTORY = re.compile(r"\b(?:session \d+|this session|same session|this round)\b",
                     re.IGNORECASE)
USER_FACING = [
    "bot/cli.py", "bot/wording.py", "bot/memory_commands", "bot/commands", "bot/catchup",
    "bot/doctor.py", "bot/ops/dbtools.py", "bot/admin/templates.py", "adapters",
]
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}
_MARKUP = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|<[^>]*>", re.DOTALL)  # template code, tags


def _skipped(tree: ast.AST) -> set[int]:
    """Docstrings (any string standing alone as a statement) and everything inside a
    logging call (operators' words, not users')."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            out.add(id(node.value))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in LOG_METHODS):
            out.update(id(sub) for sub in ast.walk(node))
    return out


def internal_words(source: str) -> list[str]:
    """User-facing string constants of ``source`` that say "turn(s)" or "carried": text
    with a space (a sentence, a header), and the noun ``plural()`` is given."""
    tree = ast.parse(source)
    skipped = _skipped(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "plural":
            for arg in node.args[1:]:
                if isinstance(arg, ast.Constant) and INTERNAL.search(str(arg.value)):
                    found.append(str(arg.value))
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in skipped):
            text = _MARKUP.sub(" ", node.value)
            if " " in text.strip() and INTERNAL.search(text):
                found.append(node.value)
    return found


def _sources() -> list[Path]:
    paths: list[Path] = []
    for name in USER_FACING:
        path = ROOT / name
        paths.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return paths


def test_user_facing_strings_say_messages_and_kept() -> None:
    found = {str(p.relative_to(ROOT)): hits for p in _sources()
             if (hits := internal_words(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_wording_scan_finds_planted_words() -> None:
    planted = '''
import logging
log = logging.getLogger()

def f(n):
    """Counts turns: a docstring may."""
    log.info("compacted %d turns", n)  # a log line may
    key = "turns"  # a name, not a sentence
    print(f"exported {plural(n, 'turn')}")
    return "MESSAGES  CARRIED  LONG-TERM", '<td>{{ r.turns }}</td> no turns'
'''
    assert sorted(internal_words(planted)) == ["<td>{{ r.turns }}</td> no turns",
                                               "MESSAGES  CARRIED  LONG-TERM", "turn"]


def test_docs_speak_of_the_product_not_of_sessions() -> None:
    docs = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").rglob("*.md")),
            *sorted((ROOT / "benchmarks" / "results").glob("*.md"))]
    found = {str(p.relative_to(ROOT)): HISTORY.findall(p.read_text(encoding="utf-8"))
             for p in docs}
    assert {k: v for k, v in found.items() if v} == {}
    assert HISTORY.findall("after session 7; in the same session; this round") == [
        "session 7", "same session", "this round"]
