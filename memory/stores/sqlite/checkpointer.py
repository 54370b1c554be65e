"""WAL checkpoints off the commit path (``SqliteStore``).

SQLite copies the write-ahead log back into the database file (a checkpoint) by itself,
inside the COMMIT that grows the log past 1,000 pages, and that COMMIT returns only after
the copy and its fsync. With the group-commit writer every caller in that batch waited
(docs/decisions/0002).

So the writer's connection never checkpoints (``wal_autocheckpoint = 0``), and this task
does, on its own connection and thread: ``CHECKPOINT_INTERVAL`` seconds after a commit, a
``PASSIVE`` checkpoint, which copies what no reader still needs and waits for nobody; the
writer keeps appending to the log meanwhile, and SQLite starts the log over once a
checkpoint has copied all of it. Durability does not change: a commit is durable in the
log (``synchronous = FULL``), and a crash before a checkpoint leaves the log to replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Awaitable, Callable

import aiosqlite

__all__ = ["CHECKPOINT_INTERVAL", "Checkpointer"]

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 1.0
"""Seconds from a commit to the checkpoint that copies it (commits meanwhile join it)."""


class Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` after commits, on its own connection."""

    def __init__(self, interval: float = CHECKPOINT_INTERVAL) -> None:
        self.interval = interval
        self.checkpoints = 0
        """Checkpoints run (for tests)."""
        self._conn: aiosqlite.Connection | None = None
        self._written = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, connect: Callable[[], Awaitable[aiosqlite.Connection]]) -> None:
        """Open the connection with ``connect`` and start waiting for commits."""
        self._conn = await connect()
        self._task = asyncio.create_task(self._loop(), name="gistbot-sqlite-checkpoint")

    def written(self) -> None:
        """A commit happened (the writer calls this after each batch)."""
        self._written.set()

    async def _loop(self) -> None:
        assert self._conn is not None
        while True:
            await self._written.wait()
            await asyncio.sleep(self.interval)
            self._written.clear()
            try:
                await self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                self.checkpoints += 1
            except sqlite3.Error as e:  # the next commit tries again; the log only grows
                log.warning("WAL checkpoint failed: %s", e)

    async def close(self) -> None:
        """Stop; a last checkpoint is left to SQLite when the store's connections close."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None
