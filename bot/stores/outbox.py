"""The outbox's rows (``bot.conversation.outbox``): each outgoing post's intent, then the platform's
id of it, so a retry after a crash finds the earlier post instead of posting again.

The delivery of a reply's last message and the settling of its debt (``owed.SETTLE``) are
one transaction, so a crash leaves either both or neither: never a delivered answer still
owed. Rows are kept ``KEEP_SECONDS``, longer than any retry of their post.
"""

from __future__ import annotations

import time
from typing import Any, Protocol, runtime_checkable

from bot.stores.owed import SETTLE, by_debt
from bot.stores.schema import Ladder, Step
from bot.stores.sql import numbered
from memory.models import ChannelKey
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.writer import WriteTx

__all__ = ["KEEP_SECONDS", "LADDER", "OutboxStore", "PostgresOutbox", "SqliteOutbox"]

KEEP_SECONDS = 7 * 86400.0  # an outbox row outlives every retry of its post


@runtime_checkable
class OutboxStore(Protocol):
    """Where the outbox keeps its rows (``outbox`` table)."""

    async def outbox_intent(self, key: ChannelKey, outbox_id: str) -> str | None:
        """Record the intent to post ``outbox_id`` in ``key``. None: the first attempt;
        ``""``: an earlier attempt that may have posted (look for it); else the platform
        id an earlier attempt recorded."""

    async def outbox_posted(self, key: ChannelKey, outbox_id: str, message_id: str, *,
                            settle: str = "") -> None:
        """Record the platform id of the post; with ``settle`` (a message id in ``key``),
        delete the reply owed to it in the same transaction."""


LADDER = Ladder("outbox", (
    Step(
        sqlite="""
        CREATE TABLE IF NOT EXISTS outbox (
            id TEXT PRIMARY KEY, platform TEXT NOT NULL, workspace TEXT NOT NULL,
            channel TEXT NOT NULL, created_at REAL NOT NULL,
            message_id TEXT NOT NULL DEFAULT ''
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS outbox_created ON outbox (created_at);
        """,
        postgres="""
        CREATE TABLE IF NOT EXISTS outbox (
            id text PRIMARY KEY, platform text NOT NULL, workspace text NOT NULL,
            channel text NOT NULL, created_at double precision NOT NULL,
            message_id text NOT NULL DEFAULT ''
        );
        CREATE INDEX IF NOT EXISTS outbox_created ON outbox (created_at);
        """,
        marker=("outbox", "message_id"),
    ),
))

FOUND = "SELECT message_id FROM outbox WHERE id = ?"
PRUNE = "DELETE FROM outbox WHERE created_at < ?"
_INTENT = (
    "INSERT INTO outbox (id, platform, workspace, channel, created_at) VALUES (?, ?, ?, ?, {now})"
)
_POSTED = (
    "INSERT INTO outbox (id, platform, workspace, channel, created_at, message_id) "
    "VALUES (?, ?, ?, ?, {now}, ?) ON CONFLICT (id) DO UPDATE SET message_id = excluded.message_id"
)
_PG_NOW = "extract(epoch from clock_timestamp())"


def _where(key: ChannelKey, outbox_id: str) -> tuple[str, str, str, str]:
    return outbox_id, key.platform, key.workspace, key.channel


# ---------------------------------------------------------------------------- SQLite


def _intent(tx: WriteTx, key: ChannelKey, outbox_id: str) -> str | None:
    row = tx.conn.execute(FOUND, (outbox_id,)).fetchone()
    if row is not None:
        return str(row[0])
    now = time.time()
    tx.conn.execute(PRUNE, (now - KEEP_SECONDS,))
    tx.conn.execute(_INTENT.format(now="?"), (*_where(key, outbox_id), now))
    return None


def _posted(tx: WriteTx, key: ChannelKey, outbox_id: str, message_id: str, settle: str) -> None:
    tx.conn.execute(_POSTED.format(now="?"), (*_where(key, outbox_id), time.time(), message_id))
    if settle:
        tx.conn.execute(SETTLE, by_debt(key, settle))


class SqliteOutbox:
    """``OutboxStore`` on a ``SqliteStore``'s writer."""

    def __init__(self, db: SqliteStore) -> None:
        self.db = db

    async def outbox_intent(self, key: ChannelKey, outbox_id: str) -> str | None:
        """See ``OutboxStore.outbox_intent``."""
        return await self.db.write(_intent, key, outbox_id)

    async def outbox_posted(self, key: ChannelKey, outbox_id: str, message_id: str, *,
                            settle: str = "") -> None:
        """See ``OutboxStore.outbox_posted``."""
        await self.db.write(_posted, key, outbox_id, message_id, settle)


# ---------------------------------------------------------------------------- PostgreSQL

_PG_INTENT = numbered(_INTENT.format(now=_PG_NOW)) + " ON CONFLICT (id) DO NOTHING RETURNING id"
_PG_POSTED = numbered(_POSTED.format(now=_PG_NOW))
_PG_PRUNE = f"DELETE FROM outbox WHERE created_at < {_PG_NOW} - $1"


class PostgresOutbox:
    """``OutboxStore`` on a ``PostgresStore``'s pool."""

    def __init__(self, db: Any) -> None:
        self.db = db

    async def outbox_intent(self, key: ChannelKey, outbox_id: str) -> str | None:
        """See ``OutboxStore.outbox_intent``."""

        async def run(conn: Any) -> str | None:
            if await conn.fetchval(_PG_INTENT, *_where(key, outbox_id)) is not None:
                await conn.execute(_PG_PRUNE, KEEP_SECONDS)
                return None
            found = await conn.fetchval(numbered(FOUND), outbox_id)
            return str(found or "")

        result: str | None = await self.db.tx(run)
        return result

    async def outbox_posted(self, key: ChannelKey, outbox_id: str, message_id: str, *,
                            settle: str = "") -> None:
        """See ``OutboxStore.outbox_posted``."""

        async def run(conn: Any) -> None:
            await conn.execute(_PG_POSTED, *_where(key, outbox_id), message_id)
            if settle:
                await conn.execute(numbered(SETTLE), *by_debt(key, settle))

        await self.db.tx(run)
