"""What the catch-up and digest tests share: a model that cites like a good one, checks
that every link in an answer resolves to a stored message of the right channel inside the
period, and quick ways to fill a channel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from memory.models import ChannelKey, NewTurn, Turn
from memory.store import Store
from tests.fakes.models import Call

__all__ = [
    "LINK",
    "cited_numbers",
    "citing_answer",
    "fill",
    "links_in",
    "resolve_links",
]

LINK = re.compile(r"\]\(<([^>]+)>\)|<(https?://[^|>]+)\|")
_LINE = re.compile(r"^\[(\d+)\] \S+ \S+ ([^:]+?)(?: \(thread [^)]*\))?: (.*)$")
_POINT = re.compile(r"^- (.*?) \[([\d, ]+)\]$")


def citing_answer(call: Call, per_call: int = 4) -> str:
    """A well-behaved catch-up model: bullets quoting numbered messages and citing them;
    on a reduce call, the first points with their own citations."""
    user = call.messages[-1]["content"]
    out = []
    for line in user.splitlines():
        if m := _LINE.match(line):
            words = " ".join(m.group(3).split()[:12])
            out.append(f"- {m.group(2)} said: {words} [{m.group(1)}]")
        elif m := _POINT.match(line):
            out.append(f"- {m.group(1)} [{m.group(2)}]")
    return "\n".join(out[:per_call]) or "Nothing."


def cited_numbers(call: Call) -> list[int]:
    """The message numbers a map call's prompt offered."""
    return [int(m.group(1)) for line in call.messages[-1]["content"].splitlines()
            if (m := _LINE.match(line))]


def links_in(text: str) -> list[str]:
    """Every link of a rendered answer (Markdown ``[n](<url>)`` or Slack ``<url|n>``)."""
    return [a or b for a, b in LINK.findall(text)]


async def fill(store: Store, key: ChannelKey, texts: Iterable[tuple[str, str]], *,
               start: float, step: float = 60.0, prefix: str = "m") -> list[Turn]:
    """Record ``(author, text)`` messages ``step`` seconds apart from ``start``."""
    out = []
    for i, (author, text) in enumerate(texts):
        turn = NewTurn(key, f"{prefix}{i}", "user", author.lower(), author, text,
                       max(1, len(text) // 4), start + i * step)
        out.append((await store.record(turn)).turn)
    return out


async def resolve_links(store: Store, links: Sequence[str], keys: Sequence[ChannelKey],
                        start: float, end: float, url_of: dict[str, Turn]) -> list[Turn]:
    """The stored turns ``links`` point to; fails when one points to no stored message of
    ``keys`` inside ``[start, end)``. ``url_of`` maps each expected URL to its turn."""
    turns = []
    for link in links:
        assert link in url_of, f"{link} is not a link to a stored message"
        turn = url_of[link]
        assert turn.key in keys, f"{link} points to another channel ({turn.key})"
        assert start <= turn.sent_at < end, f"{link} is outside the period"
        stored = await store.turns_between(turn.key, turn.sent_at, turn.sent_at + 0.001)
        assert turn.message_id in {t.message_id for t in stored}, f"{link} is not stored"
        turns.append(turn)
    return turns
