"""What a SQLite turn search reads (docs/decisions/0055): a "best" pass weighs at most
``RERANK_EXTRA`` rows beyond its limit (small searches still ``RERANK`` times theirs), and
the rows it weighs are the turns it returns, not looked up a second time."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.models import ChannelKey
from memory.stores.sqlite import turn_search
from memory.stores.sqlite.store import SqliteStore
from tests.harness.store_contract import new_turn

KEY = ChannelKey("discord", "g1", "reads")
FILLER = " ".join(f"filler{i}" for i in range(30))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(tmp_path / "gistbot.db")
    await s.open()
    yield s
    await s.close()


async def _channel(store: SqliteStore, short_at: int) -> int:
    """12 long turns holding "ping" (one of them, ``short_at`` from the newest, short),
    after 20 turns without it; returns the short turn's seq."""
    for i in range(20):
        await store.record(new_turn(KEY, f"o{i}", f"lunch plan {i}", tokens=3))
    short = 0
    for i in range(12, 0, -1):  # i: place from the newest (1 = newest)
        text = "ping" if i == short_at else f"ping {FILLER}"
        turn = (await store.record(new_turn(KEY, f"p{i}", text, tokens=len(text.split())))).turn
        short = turn.seq if i == short_at else short
    return short


@pytest.mark.parametrize(("extra", "short_at", "first"), [
    (10, 6, True),   # limit 2 weighs min(2 * 3, 2 + 10) = 6 rows: the 6th newest is weighed
    (2, 6, False),   # capped at 2 + 2 = 4: the 6th newest is never weighed
    (2, 4, True),    # ... the 4th newest still is, and its length ranks it first
])
async def test_a_best_pass_weighs_at_most_its_limit_plus_the_extra(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch, extra: int, short_at: int, first: bool
) -> None:
    # Every match holds "ping" once, so bm25() ties them (newest first) and only the
    # length tells the short one apart, if it is among the rows weighed.
    monkeypatch.setattr(turn_search, "RERANK_EXTRA", extra)
    short = await _channel(store, short_at)
    found = await store.search_turns(KEY, ["ping"], before_seq=100, limit=2)
    assert len(found) == 2
    assert (found[0].seq == short) is first, [(t.seq, t.text[:8]) for t in found]


async def test_the_turns_a_best_pass_weighs_are_not_read_again(store: SqliteStore) -> None:
    short = await _channel(store, 3)
    statements: list[str] = []
    conn = store._readers.first
    assert conn is not None
    await conn._execute(conn._conn.set_trace_callback, statements.append)
    found = await store.search_turns(KEY, ["ping"], before_seq=100, limit=5)
    await conn._execute(conn._conn.set_trace_callback, None)
    assert found[0].seq == short and len(found) == 5
    # The found turns are whole (what ``turns_at`` reads for them) ...
    assert found == [t for s in [t.seq for t in found] for t in await store.turns_at(KEY, [s])]
    # ... and no statement looked them up by seq after the pass that weighed them.
    assert not [s for s in statements if re.search(r"seq IN \(", s)], statements
