"""Backfill marks: where a channel's backfill after downtime started, kept until it has
stored everything it read (``adapters.backfill`` says why), so a process killed
mid-backfill resumes from there, not past a hole. ``/reset`` drops the channel's mark in
its own transaction (the hook this role adds to the memory store's ``on_reset``): a later
backfill must not re-read forgotten messages from a mark set before it.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Protocol, runtime_checkable

from bot.stores.schema import Ladder, Step
from bot.stores.sql import numbered
from memory.models import ChannelKey
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.writer import WriteTx

__all__ = ["LADDER", "BackfillMarks", "History", "PostgresBackfill", "SqliteBackfill"]


@runtime_checkable
class BackfillMarks(Protocol):
    """One mark per channel while its backfill runs."""

    async def begin_backfill(self, key: ChannelKey, after_id: str) -> str:
        """Durably mark a backfill of ``key`` starting after ``after_id``, unless one is
        marked already (an interrupted one: it is returned, and resumed from)."""

    async def end_backfill(self, key: ChannelKey, after_id: str) -> None:
        """Clear the mark if it is still ``after_id``: everything read was stored."""

    async def backfill_mark(self, key: ChannelKey) -> str | None:
        """The mark in effect, if any."""


LADDER = Ladder("backfill", (
    Step(
        sqlite="""
        CREATE TABLE IF NOT EXISTS backfill_marks (
            platform TEXT NOT NULL, workspace TEXT NOT NULL, channel TEXT NOT NULL,
            after_id TEXT NOT NULL, set_at REAL NOT NULL,
            PRIMARY KEY (platform, workspace, channel)
        ) WITHOUT ROWID
        """,
        postgres="""
        CREATE TABLE IF NOT EXISTS backfill_marks (
            platform text NOT NULL, workspace text NOT NULL, channel text NOT NULL,
            after_id text NOT NULL, set_at double precision NOT NULL,
            PRIMARY KEY (platform, workspace, channel)
        )
        """,
        marker=("backfill_marks", "after_id"),
    ),
))

_KEY = "platform = ? AND workspace = ? AND channel = ?"
GET = f"SELECT after_id FROM backfill_marks WHERE {_KEY}"
END = f"DELETE FROM backfill_marks WHERE {_KEY} AND after_id = ?"
CLEAR = f"DELETE FROM backfill_marks WHERE {_KEY}"
# The CTE's insert is invisible to the outer SELECT (one snapshot): exactly one row comes
# back, the new mark or the one already set.
_PG_BEGIN = (
    "WITH ins AS (INSERT INTO backfill_marks (platform, workspace, channel, after_id, set_at) "
    "VALUES ($1, $2, $3, $4, extract(epoch FROM clock_timestamp())) "
    "ON CONFLICT (platform, workspace, channel) DO NOTHING RETURNING after_id) "
    "SELECT after_id FROM ins UNION ALL SELECT after_id FROM backfill_marks "
    "WHERE platform = $1 AND workspace = $2 AND channel = $3"
)


def _args(key: ChannelKey) -> tuple[str, str, str]:
    return key.platform, key.workspace, key.channel


# ---------------------------------------------------------------------------- SQLite


def _begin(tx: WriteTx, key: ChannelKey, after_id: str) -> str:
    tx.conn.execute(
        "INSERT OR IGNORE INTO backfill_marks (platform, workspace, channel, after_id, set_at) "
        "VALUES (?, ?, ?, ?, ?)", (*_args(key), after_id, time.time()),
    )
    return str(tx.conn.execute(GET, _args(key)).fetchone()[0])


def _end(tx: WriteTx, key: ChannelKey, after_id: str) -> None:
    tx.conn.execute(END, (*_args(key), after_id))


def _get(conn: sqlite3.Connection, key: ChannelKey) -> str | None:
    row = conn.execute(GET, _args(key)).fetchone()
    return None if row is None else str(row[0])


def _clear(tx: WriteTx, key: ChannelKey) -> None:
    """Drop the channel's mark (``SqliteStore.on_reset``)."""
    tx.conn.execute(CLEAR, _args(key))


class SqliteBackfill:
    """``BackfillMarks`` on a ``SqliteStore``; adds the mark's removal to its resets."""

    def __init__(self, db: SqliteStore) -> None:
        self.db = db
        db.on_reset.append(_clear)

    async def begin_backfill(self, key: ChannelKey, after_id: str) -> str:
        """See ``BackfillMarks.begin_backfill``."""
        return await self.db.write(_begin, key, after_id)

    async def end_backfill(self, key: ChannelKey, after_id: str) -> None:
        """See ``BackfillMarks.end_backfill``."""
        await self.db.write(_end, key, after_id)

    async def backfill_mark(self, key: ChannelKey) -> str | None:
        """See ``BackfillMarks.backfill_mark``."""
        return await self.db.read(_get, key)


# ---------------------------------------------------------------------------- PostgreSQL


async def _pg_clear(conn: Any, key: ChannelKey) -> None:
    """Drop the channel's mark (``PostgresStore.on_reset``)."""
    await conn.execute(numbered(CLEAR), *_args(key))


class PostgresBackfill:
    """``BackfillMarks`` on a ``PostgresStore``; adds the mark's removal to its resets."""

    def __init__(self, db: Any) -> None:
        self.db = db
        db.on_reset.append(_pg_clear)

    async def begin_backfill(self, key: ChannelKey, after_id: str) -> str:
        """See ``BackfillMarks.begin_backfill``."""
        ((mark,),) = await self.db.fetch(_PG_BEGIN, *_args(key), after_id)
        return str(mark)

    async def end_backfill(self, key: ChannelKey, after_id: str) -> None:
        """See ``BackfillMarks.end_backfill``."""
        await self.db.fetch(numbered(END), *_args(key), after_id)

    async def backfill_mark(self, key: ChannelKey) -> str | None:
        """See ``BackfillMarks.backfill_mark``."""
        rows = await self.db.fetch(numbered(GET), *_args(key))
        return str(rows[0][0]) if rows else None


class History:
    """What a backfill after downtime uses (``adapters.backfill.HistoryStore``): the memory
    store's channels and newest message ids, and this role's marks."""

    def __init__(self, memory: Any, marks: BackfillMarks) -> None:
        self.memory, self.marks = memory, marks

    async def channels(self) -> list[ChannelKey]:
        """Every channel with stored state."""
        channels: list[ChannelKey] = await self.memory.channels()
        return channels

    async def newest_message_ids(self, key: ChannelKey, *, limit: int = 20) -> list[str]:
        """Message ids of the newest ``limit`` user turns, newest seq first."""
        ids: list[str] = await self.memory.newest_message_ids(key, limit=limit)
        return ids

    async def begin_backfill(self, key: ChannelKey, after_id: str) -> str:
        """See ``BackfillMarks.begin_backfill``."""
        return await self.marks.begin_backfill(key, after_id)

    async def end_backfill(self, key: ChannelKey, after_id: str) -> None:
        """See ``BackfillMarks.end_backfill``."""
        await self.marks.end_backfill(key, after_id)

    async def backfill_mark(self, key: ChannelKey) -> str | None:
        """See ``BackfillMarks.backfill_mark``."""
        return await self.marks.backfill_mark(key)
