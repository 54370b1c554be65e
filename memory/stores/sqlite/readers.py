"""``SqliteStore``'s read connections: a small pool, so independent reads run at once.

Each aiosqlite connection has one worker thread, and SQLite releases the GIL while it
works, so two connections read on two cores. A reply's view makes two independent reads
(the archive search and the turn search, ``memory.archive``); on one connection they
queued behind each other and the view took their sum (docs/decisions/0016).

A read goes to the connection with the fewest reads in flight, the first on a tie, so
reads one after another always use the first connection (tests that trace or count a
reader's statements see them all there). Each read is its own transaction (WAL: the last
committed state), so which connection serves it does not change what it sees.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

import aiosqlite

from memory.stores.sqlite.writer import raw_connection

__all__ = ["Readers"]

T = TypeVar("T")


class Readers:
    """Read connections, each with its count of reads in flight."""

    def __init__(self) -> None:
        self.conns: list[aiosqlite.Connection] = []
        self._busy: list[int] = []

    def add(self, conn: aiosqlite.Connection) -> None:
        """Serve reads on ``conn`` too (opened and configured by the store)."""
        self.conns.append(conn)
        self._busy.append(0)

    @property
    def first(self) -> aiosqlite.Connection | None:
        """The connection sequential reads use; None once closed (or before opening)."""
        return self.conns[0] if self.conns else None

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the least busy connection, in its thread."""
        i = min(range(len(self.conns)), key=self._busy.__getitem__)
        conn = self.conns[i]
        self._busy[i] += 1
        try:
            result: T = await conn._execute(  # type: ignore[no-untyped-call]
                lambda: fn(raw_connection(conn))
            )
        finally:
            self._busy[i] -= 1
        return result

    def take(self) -> list[aiosqlite.Connection]:
        """Forget every connection and return them (for the store to close)."""
        conns, self.conns, self._busy = self.conns, [], []
        return conns
