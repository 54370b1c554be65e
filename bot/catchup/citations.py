"""Citations: the model cites message *numbers*; gistbot turns them into links, and only
what the cited messages support survives.

The catch-up prompt lists the period's messages as ``[n] time speaker: text`` and asks for
bullets ending in ``[n]`` or ``[n, m]``. Back from the model, ``check_bullets``:

1. keeps only citations to numbers it was given (a number out of range, or one of another
   map step's messages, points to no message of the period and is dropped);
2. drops a bullet left without a citation (every point must cite its source);
3. drops a bullet naming an identifier (an order number, URL, date, version, amount —
   ``memory.identifiers``) that none of its cited messages contains: the model invented
   it, or cited the wrong message, and either way the link would not back the claim.

``render`` appends each bullet's links (``Linker``: Discord jump URLs, Slack permalinks,
or plain references on the console, their times in the zone the catch-up was asked in) as
Markdown, which the adapters turn into their platform's link syntax.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from memory.identifiers import extract_identifiers, mentioned_in
from memory.models import Turn

__all__ = [
    "Bullet",
    "Linker",
    "Numbered",
    "check_bullets",
    "number_turns",
    "numbered_line",
    "parse_bullets",
    "plain_links",
    "render",
    "strip_citations",
]

Linker = Callable[[Sequence[Turn]], Awaitable[Mapping[Turn, str]]]
"""Links for turns (a turn without one is cited as plain text): supplied per platform."""

_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.)])\s+(.*\S)\s*$")
_CITES = re.compile(r"\[\s*(?:#?\d+\s*(?:[,;]|\band\b)?\s*)+\]")
_NUMBER = re.compile(r"\d+")
_TRAILING = re.compile(r"(?:\s*\[\s*(?:#?\d+\s*(?:[,;]|\band\b)?\s*)+\])+\s*[.。]?\s*$")
_SPACE_PUNCT = re.compile(r"\s+([.,;:!?。、])")
_UTC = ZoneInfo("UTC")
MAX_LINE_CHARS = 600  # one message in a prompt; longer ones are cut (the link has the rest)


@dataclass(frozen=True, slots=True)
class Numbered:
    """A message of the period and the number the model cites it by (1-based)."""

    n: int
    turn: Turn
    thread: str = ""  # the thread's name or id, when it came from one


@dataclass(frozen=True, slots=True)
class Bullet:
    """One point of a catch-up: its text (citations removed) and the numbers it cites."""

    text: str
    cites: tuple[int, ...]


def number_turns(turns: Sequence[Turn], threads: Mapping[str, str] | None = None) -> list[Numbered]:
    """Number ``turns`` 1.. in time order; ``threads`` names the thread channels."""
    ordered = sorted(turns, key=lambda t: (t.sent_at, t.key, t.seq))
    names = threads or {}
    return [Numbered(i + 1, t, names.get(t.key.channel, "")) for i, t in enumerate(ordered)]


def numbered_line(item: Numbered, zone: ZoneInfo = _UTC) -> str:
    """``[n] HH:MM speaker (in thread): text`` — one line, as the prompt shows it."""
    when = datetime.fromtimestamp(item.turn.sent_at, UTC).astimezone(zone).strftime("%a %H:%M")
    text = " ".join(item.turn.text.split())
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + " […]"
    where = f" (thread {item.thread})" if item.thread else ""
    return f"[{item.n}] {when} {item.turn.author_name}{where}: {text}"


def strip_citations(text: str) -> str:
    """``text`` without its ``[n]`` citation groups."""
    return _SPACE_PUNCT.sub(r"\1", " ".join(_CITES.sub(" ", text).split()))


def parse_bullets(answer: str) -> list[Bullet]:
    """The bullets of a model answer with the numbers each cites (in order, no repeats).

    A line that is not a bullet but ends in citations counts as one too (models drop the
    dash now and then); headings and prose without citations are not points.
    """
    out: list[Bullet] = []
    for line in answer.splitlines():
        m = _BULLET.match(line)
        body = m.group(1) if m else line.strip()
        trailing = _TRAILING.search(body)
        if not m and not trailing:
            continue
        cites: list[int] = []
        for group in _CITES.findall(body):
            for number in _NUMBER.findall(group):
                if int(number) not in cites:
                    cites.append(int(number))
        text = strip_citations(body).rstrip(" ,;:")
        if text:
            out.append(Bullet(text, tuple(cites)))
    return out


def check_bullets(bullets: Sequence[Bullet], allowed: Mapping[int, Turn]) -> list[Bullet]:
    """Citations restricted to ``allowed`` numbers; bullets left uncited, or naming an
    identifier that no cited message contains, dropped (see the module docstring)."""
    kept: list[Bullet] = []
    for bullet in bullets:
        cites = tuple(n for n in bullet.cites if n in allowed)
        if not cites:
            continue
        idents = extract_identifiers(bullet.text)
        if idents:
            found = mentioned_in("\n".join(allowed[n].text for n in cites))
            if not all(found(i) for i in idents):
                continue
        kept.append(Bullet(bullet.text, cites))
    return kept


async def plain_links(turns: Sequence[Turn]) -> Mapping[Turn, str]:
    """No links (the console): every citation is rendered as a plain reference."""
    return {}


def _cite(n: int, turn: Turn, link: str | None, zone: ZoneInfo) -> str:
    if link:
        return f"[{n}](<{link}>)"
    when = datetime.fromtimestamp(turn.sent_at, UTC).astimezone(zone).strftime("%H:%M")
    return f"[{n}: {turn.author_name} {when}]"


def render(bullets: Sequence[Bullet], numbered: Mapping[int, Turn],
           links: Mapping[Turn, str], zone: ZoneInfo = _UTC) -> str:
    """Markdown bullets, each ending with its citations as links (a plain citation gives
    the message's time in ``zone``)."""
    lines = []
    for b in bullets:
        cites = " ".join(_cite(n, numbered[n], links.get(numbered[n]), zone) for n in b.cites)
        lines.append(f"- {b.text} {cites}")
    return "\n".join(lines)
