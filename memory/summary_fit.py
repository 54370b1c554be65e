"""Fitting a summary to its bound, and putting lost identifiers back under its facts.

A model's tokenizer is not gistbot's, so an answer may come back a bit over the bound even
from a model that tried; rejecting it would stall compaction forever with such a model
(docs/decisions/0006). ``shorten_summary`` trims at sentence and section boundaries
instead. What leaves first:

1. sentences without an identifier outside the facts section, the last ones first;
2. sentences without an identifier in the facts section;
3. sentences with an identifier outside the facts section;
4. sentences with an identifier in the facts section, last first.

A heading stays while something under it stays; a single sentence over the bound is cut
with an ellipsis. Identifiers are checked *after* trimming, so what trimming cost is asked
for again or carried as a fact. ``add_to_facts`` appends lines under the facts section
(``## Facts and identifiers`` or a translated heading), creating it when there is none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory.identifiers import extract_identifiers, split_sentences
from memory.tokens import Tokenizer

__all__ = ["FACTS_HEADING", "add_to_facts", "shorten_summary"]

FACTS_HEADING = "## Facts and identifiers"
_HEADING = re.compile(r"^\s*#{1,6}\s")
_FACTS_TITLE = re.compile(r"(?i)fact|identif|사실|식별|事実|識別|ファクト|事实")
_ITEM = re.compile(r"^(\s*(?:[-*•]|[0-9]+[.)])\s+)?(.*)$")


@dataclass(frozen=True, slots=True)
class _Unit:
    line: int
    text: str
    tier: int
    order: int


def _units(lines: list[str]) -> tuple[list[_Unit], dict[int, str], dict[int, int]]:
    """Sentence units, each line's item prefix, and each line's heading line (or -1)."""
    units: list[_Unit] = []
    prefixes: dict[int, str] = {}
    owner: dict[int, int] = {}
    heading, in_facts = -1, False
    for i, line in enumerate(lines):
        if _HEADING.match(line):
            heading, in_facts = i, _FACTS_TITLE.search(line) is not None
            continue
        if not line.strip():
            continue
        match = _ITEM.match(line)
        assert match is not None  # the pattern matches any line
        prefixes[i] = match[1] or ""
        owner[i] = heading
        for sentence in split_sentences(match[2]) or [match[2].strip()]:
            tier = (2 if extract_identifiers(sentence) else 0) + (1 if in_facts else 0)
            units.append(_Unit(i, sentence, tier, len(units)))
    return units, prefixes, owner


def _render(lines: list[str], units: Sequence[_Unit], prefixes: dict[int, str],
            owner: dict[int, int]) -> str:
    kept: dict[int, list[str]] = {}
    for unit in units:
        kept.setdefault(unit.line, []).append(unit.text)
    live_headings = {owner[i] for i in kept}
    out: list[str] = []
    for i, line in enumerate(lines):
        if _HEADING.match(line):
            if i in live_headings:
                out.append(line.rstrip())
        elif i in kept:
            out.append(prefixes[i] + " ".join(kept[i]))
        elif not line.strip() and out and out[-1]:
            out.append("")
    return "\n".join(out).strip()


def _cut(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """``text`` cut to ``max_tokens`` with an ellipsis (a re-encoded cut can count
    differently, so loop)."""
    budget = max_tokens - 1
    while budget > 0:
        cut = tokenizer.truncate(text, budget).rstrip() + "…"
        if tokenizer.count(cut) <= max_tokens:
            return cut
        budget -= 1
    return ""


def shorten_summary(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """``text`` if it fits ``max_tokens``, else trimmed as the module docstring says.

    Never returns more than ``max_tokens`` tokens; empty only when ``max_tokens`` < 2.
    """
    if tokenizer.count(text) <= max_tokens:
        return text
    lines = text.strip().split("\n")
    units, prefixes, owner = _units(lines)
    if not units:
        return _cut(text.strip(), max_tokens, tokenizer)
    drop_order = sorted(units, key=lambda u: (u.tier, -u.order))
    keep = set(range(len(units)))
    costs = [tokenizer.count(u.text) + 1 for u in units]
    headings = {owner[u.line] for u in units}
    fixed = sum(tokenizer.count(lines[h]) + 1 for h in headings if h >= 0)
    dropped = 0
    while len(keep) > 1 and fixed + sum(costs[i] for i in keep) > max_tokens:  # cheap pass
        keep.discard(drop_order[dropped].order)
        dropped += 1
    while True:  # exact pass
        rendered = _render(lines, [units[i] for i in sorted(keep)], prefixes, owner)
        if tokenizer.count(rendered) <= max_tokens:
            return rendered
        if len(keep) == 1:
            return _cut(rendered, max_tokens, tokenizer)
        keep.discard(drop_order[dropped].order)
        dropped += 1


def add_to_facts(text: str, lines: Sequence[str]) -> str:
    """``text`` with ``lines`` appended at the end of its facts section (made if missing)."""
    if not lines:
        return text
    rows = text.rstrip().split("\n")
    start = next(
        (i for i, r in enumerate(rows) if _HEADING.match(r) and _FACTS_TITLE.search(r)), None
    )
    if start is None:
        return "\n".join([*rows, "", FACTS_HEADING, *lines]).strip()
    end = next((i for i in range(start + 1, len(rows)) if _HEADING.match(rows[i])), len(rows))
    while end > start + 1 and not rows[end - 1].strip():
        end -= 1
    return "\n".join([*rows[:end], *lines, *rows[end:]]).strip()
