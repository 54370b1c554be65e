"""A reply's view at a channel's size: ``MemoryManager.view(recall=True)`` over SQLite files
holding 2,000 and 1,000,000 stored turns of one channel (part of
``python -m benchmarks.reply_overhead``).

**Build.** The shipped conversation's messages, cycled, each with ``NOISE`` words of a
Zipf-distributed 50,000-word vocabulary appended. The conversation's own words grow as
common as the channel is long (cycled 500 times, nearly all of them end up in more turns
than a turn search uses a term of, ``turn_search.COMMON_DOCS``), while the Zipf words keep
a long channel's spread: a few in a large share of the turns, most in a few hundred or
less, so that a question's rarer words still select candidates among a million turns.
Bulk-inserted with the
store's own ``INSERT`` (so the turn index's triggers run) in one transaction per 100,000
turns, the queue indexed before each ``COMMIT`` as the store's writer does. All but the
newest 20 turns are folded under a rolling summary of about 500 tokens, the state of a
compacted channel. Reports the time and the file's size.

**Views.** The conversation's questions to the bot (every 5th message), each with
``NOISE`` Zipf words of its own, recorded as
a new turn through ``SqliteStore.record`` and then viewed with recall at the reply
benchmark's memory budget: the snapshot, the archive search, the turn search and its
follow-up, the ranking, the neighbours' read and composing, as a reply does. The first
``WARM`` views warm the page cache and the store's term counts and are not timed.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.conversation import Row, load_conversation
from benchmarks.ingest import InstantModel
from memory.manager import MemoryManager
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.queries import _INSERT_TURN
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.turn_search import drain, register
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter

__all__ = ["WARM", "Scale", "build", "measure"]

KEY = ChannelKey("bench", "team", "archive")
UNFOLDED = 20
"""Newest turns left unfolded (a compacted channel's tail)."""
BATCH = 100_000
"""Turns per transaction of the build."""
WARM = 20
NOISE = 3
"""Zipf words appended to each stored turn and question."""
T0 = 1_700_000_000.0


@dataclass(frozen=True)
class Scale:
    """One size's build and views (seconds)."""

    turns: int
    build_seconds: float
    file_bytes: int
    views: list[float]
    cpu: list[float]
    """CPU seconds of this process per view (its reader threads included): what a view
    costs, which other jobs on a shared machine do not stretch as they stretch time."""


class _Zipf:
    """Words of a 50,000-word vocabulary, a few very common, most rare."""

    def __init__(self, rng: random.Random, size: int = 50_000) -> None:
        self.rng = rng
        self.words = [f"{w}{n}" for n, w in zip(range(size), itertools.cycle(
            ("amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron")))]
        self.cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(size)))

    def sample(self, k: int) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.cum, k=k))


def _summary(rows: Sequence[Row], tok: TokenCounter) -> str:
    """About 500 tokens of the conversation's own words, as a rolling summary would hold."""
    lines: list[str] = ["## Topics"]
    for row in rows:
        lines.append(f"- {row.author}: {row.text}")
        if tok.count("\n".join(lines)) > 500:
            break
    return "\n".join(lines[:-1])


def build(path: Path, turns: int, rows: Sequence[Row], tok: TokenCounter) -> None:
    """``turns`` turns of one channel in ``path`` (whose schema exists), all folded but the
    newest ``UNFOLDED``, under a summary (see the module docstring)."""
    rng = random.Random(11)
    zipf = _Zipf(rng)
    counted: dict[str, int] = {}
    conn = sqlite3.connect(path, isolation_level=None)
    register(conn)
    try:
        conn.execute("BEGIN")
        (cid,) = conn.execute(
            "INSERT INTO channels (platform, workspace, channel, next_seq, folded_through, "
            "summary, version) VALUES (?, ?, ?, ?, ?, ?, 1) RETURNING id",
            (KEY.platform, KEY.workspace, KEY.channel, turns + 1, max(turns - UNFOLDED, 0),
             _summary(rows, tok)),
        ).fetchone()
        batch: list[tuple[object, ...]] = []
        for seq, row in zip(range(1, turns + 1), itertools.cycle(rows)):
            text = f"{row.text} {zipf.sample(NOISE)}"
            n = counted.get(row.text)
            if n is None:
                n = counted[row.text] = tok.count(row.text)
            batch.append((cid, seq, f"m{seq}", "user", row.author_id, row.author, text,
                          n + 2 * NOISE, T0 + 30.0 * seq))
            if len(batch) == BATCH:
                conn.executemany(_INSERT_TURN, batch)
                batch = []
                drain(conn)  # what the store's writer does before each COMMIT
                conn.execute("COMMIT")
                conn.execute("BEGIN")
        conn.executemany(_INSERT_TURN, batch)
        drain(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal"))
               if p.exists())


async def measure(folder: Path, turns: int, budget: int, questions: Sequence[Row],
                  tok: TokenCounter) -> Scale:
    """Build a ``turns``-turn channel in ``folder`` and time a view with recall for each
    of ``questions`` (the first ``WARM`` untimed)."""
    path = folder / f"view-{turns}.db"
    async with SqliteStore(path):  # the schema
        pass
    started = time.perf_counter()
    build(path, turns, load_conversation(), tok)
    built = time.perf_counter() - started
    views: list[float] = []
    cpu: list[float] = []
    zipf = _Zipf(random.Random(13))
    async with SqliteStore(path) as store:
        memory = MemoryManager(store, Summarizer(InstantModel(), tok), tok)
        for k, row in enumerate(questions):
            text = f"@gistbot {row.text} {zipf.sample(NOISE)}"
            await store.record(NewTurn(KEY, f"q{k}", "user", row.author_id, row.author, text,
                                       tok.count(text), T0 + 30.0 * (turns + k + 1)))
            began, used = time.perf_counter(), time.process_time()
            await memory.view(KEY, budget, recall=True)
            if k >= WARM:
                views.append(time.perf_counter() - began)
                cpu.append(time.process_time() - used)
    size = _size(path)
    path.unlink()
    return Scale(turns, built, size, views, cpu)
