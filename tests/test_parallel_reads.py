"""A reply's independent reads run at once (issue 13: scenario 1's reply p95).

``Archive.view`` starts the archive search and the turn search together, and
``SqliteStore`` serves reads on two connections, so the view takes the longer read's time,
not the sum. Both tests block one read until the other has run: done one after another,
the second would never start while the first waits, and the test fails (after a bound,
so it cannot hang) instead of passing.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory.archive import Archive
from memory.config import VIEW_TURN_LIMIT, MemoryConfig
from memory.models import ChannelKey, NewTurn, Recall, Turn
from memory.stores.sqlite.store import SqliteStore
from memory.tokens import TokenCounter

KEY = ChannelKey("discord", "g", "c")
TOK = TokenCounter("gpt-4o")
BOUND = 10.0  # seconds a blocked read waits for the other before the test gives up


async def _store(path: Path, n: int = 60) -> SqliteStore:
    store = SqliteStore(path)
    await store.open()
    for i in range(n):
        text = f"the invoice INV-{i:03d} was paid" if i == 3 else f"lunch plan {i} sounds fine"
        await store.record(NewTurn(KEY, f"m{i}", "user", "u", "Ann", text, TOK.count(text),
                                   1_700_000_000.0 + 60 * i))
    return store


class _Rendezvous:
    """Wraps a store: ``search`` waits until ``search_turns`` has started."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.turn_search_started = asyncio.Event()
        self.waited: bool | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def search(self, *args: Any, **kwargs: Any) -> Recall:
        try:
            await asyncio.wait_for(self.turn_search_started.wait(), BOUND)
            self.waited = True
        except TimeoutError:
            self.waited = False
        return await self.store.search(*args, **kwargs)

    async def search_turns(self, *args: Any, **kwargs: Any) -> Sequence[Turn]:
        self.turn_search_started.set()
        return await self.store.search_turns(*args, **kwargs)


async def test_the_archive_search_and_the_turn_search_run_at_once(tmp_path: Path) -> None:
    store = await _store(tmp_path / "s.db")
    try:
        await store.record(NewTurn(KEY, "q", "user", "u", "Ann", "which invoice was paid?",
                                   6, 1_700_009_000.0))
        state, turns = await store.snapshot(KEY, limit=VIEW_TURN_LIMIT)
        both = _Rendezvous(store)
        archive = Archive(both, TOK, MemoryConfig(recall_tokens=None))  # type: ignore[arg-type]
        view = await archive.view(KEY, state, turns, 300)
        assert both.waited is True  # the turn search started while the archive search waited
        shown = [t.text for t in (*view.recall.turns, *view.turns)]
        assert "the invoice INV-003 was paid" in shown  # and the view is whole
    finally:
        await store.close()


async def test_sqlite_serves_a_read_while_another_is_running(tmp_path: Path) -> None:
    store = await _store(tmp_path / "s.db", n=5)
    second_done = threading.Event()

    def slow(conn: sqlite3.Connection) -> bool:
        # Holds its connection until the other read has finished, or gives up.
        return second_done.wait(BOUND)

    def quick(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT count(*) FROM turns").fetchone()[0])

    async def then_quick() -> int:
        n = await store._read(quick)
        second_done.set()
        return n

    try:
        waited, n = await asyncio.gather(store._read(slow), then_quick())
        assert n == 5
        assert waited is True  # the quick read ran on the other connection meanwhile
    finally:
        second_done.set()
        await store.close()


async def test_one_reader_serves_reads_in_turn(tmp_path: Path) -> None:
    """``readers=1`` is the old shape: reads queue on one connection (and the view still
    works, the two reads one after the other)."""
    store = SqliteStore(tmp_path / "s.db", readers=1)
    await store.open()
    try:
        order: list[str] = []

        def read(conn: sqlite3.Connection, name: str) -> None:
            order.append(name)

        await asyncio.gather(store._read(read, "a"), store._read(read, "b"))
        assert order == ["a", "b"]
        assert store._readers.conns == [store._r]
    finally:
        await store.close()
