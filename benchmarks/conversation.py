"""The shipped benchmark conversation and its planted facts.

``data/conversation.jsonl`` is a 2,000-turn, eight-speaker team channel and
``data/probes.jsonl`` lists the 36 planted identifiers with the turn that states each one
and a question whose exact answer it is; both come from ``make_conversation.py`` (run once,
committed). ``replay`` turns rows into the ``IncomingMessage`` values an adapter would hand
the service, addressing the bot on every ``reply_every``-th turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bot.messages import IncomingMessage
from memory.identifiers import contains_identifier
from memory.models import ChannelKey

__all__ = ["DATA", "Probe", "Row", "load_conversation", "load_probes", "probe_row", "replay",
           "retained"]

DATA = Path(__file__).parent / "data"
T0 = 1_717_000_000.0  # a fixed clock: the conversation starts here, one turn every 45 s


@dataclass(frozen=True)
class Row:
    """One turn of the shipped conversation."""

    i: int
    author_id: str
    author: str
    topic: str
    text: str


@dataclass(frozen=True)
class Probe:
    """A planted identifier: its value, the turn that states it, and a question for it."""

    value: str
    turn: int
    speaker: str
    question: str


def _rows(name: str) -> Iterator[dict[str, object]]:
    with open(DATA / name, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def load_conversation(turns: int | None = None) -> list[Row]:
    """The first ``turns`` turns (all 2,000 by default)."""
    rows = [Row(**r) for r in _rows("conversation.jsonl")]  # type: ignore[arg-type]
    return rows[:turns] if turns else rows


def load_probes(turns: int | None = None) -> list[Probe]:
    """The planted facts stated within the first ``turns`` turns."""
    probes = [Probe(**p) for p in _rows("probes.jsonl")]  # type: ignore[arg-type]
    return [p for p in probes if turns is None or p.turn <= turns]


def addressed(row: Row, reply_every: int) -> bool:
    """Whether the bot is mentioned on this turn (every ``reply_every``-th turn)."""
    return row.i % reply_every == 0


def message(key: ChannelKey, row: Row, *, mention: bool) -> IncomingMessage:
    """The ``IncomingMessage`` for one row, as an adapter would build it."""
    return IncomingMessage(
        key=key, message_id=f"m{row.i}", author_id=row.author_id, author_name=row.author,
        text=row.text, sent_at=T0 + 45 * row.i, mentions_bot=mention,
    )


def probe_row(k: int, probe: Probe) -> Row:
    """The ``k``-th probe question as a turn after the conversation (Dana asks it)."""
    return Row(i=100_000 + k, author_id="U01", author="Dana", topic="probe",
               text=f"@gistbot {probe.question} Answer with the exact value.")


def replay(key: ChannelKey, rows: list[Row], reply_every: int) -> Iterator[IncomingMessage]:
    """The conversation as incoming messages; every ``reply_every``-th one mentions the bot."""
    for row in rows:
        yield message(key, row, mention=addressed(row, reply_every))


def retained(memory_text: str, probes: list[Probe]) -> list[Probe]:
    """The probes whose identifier appears verbatim in ``memory_text``."""
    return [p for p in probes if contains_identifier(memory_text, p.value)]
