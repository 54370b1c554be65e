"""SQLite side of the outbox (``bot.outbox.OutboxStore``): each outgoing post's intent,
then the platform's id of it (schema step 13).

The delivery of a reply's last message and the settling of its debt are one write, so a
crash leaves either both or neither: never a delivered answer still owed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from memory.models import ChannelKey
from memory.stores.sqlite.owed import settle_owed
from memory.stores.sqlite.writer import WriteTx

P = ParamSpec("P")
T = TypeVar("T")

__all__ = ["KEEP_SECONDS", "SqliteOutbox", "intent", "posted"]

KEEP_SECONDS = 7 * 86400.0  # an outbox row outlives every retry of its post


def intent(tx: WriteTx, key: ChannelKey, outbox_id: str) -> str | None:
    """Record the intent to post ``outbox_id``; an earlier attempt's state if there was
    one (``""``: intended, maybe posted; else the platform id)."""
    row = tx.conn.execute("SELECT message_id FROM outbox WHERE id = ?", (outbox_id,)).fetchone()
    if row is not None:
        return str(row[0])
    now = time.time()
    tx.conn.execute("DELETE FROM outbox WHERE created_at < ?", (now - KEEP_SECONDS,))
    tx.conn.execute(
        "INSERT INTO outbox (id, platform, workspace, channel, created_at) VALUES (?, ?, ?, ?, ?)",
        (outbox_id, key.platform, key.workspace, key.channel, now),
    )
    return None


def posted(tx: WriteTx, key: ChannelKey, outbox_id: str, message_id: str, settle: str) -> None:
    """Record the post's platform id; settle the debt of ``settle`` (a message id) too."""
    tx.conn.execute(
        "INSERT INTO outbox (id, platform, workspace, channel, created_at, message_id) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET message_id = excluded.message_id",
        (outbox_id, key.platform, key.workspace, key.channel, time.time(), message_id),
    )
    if settle:
        settle_owed(tx, key, settle)


class SqliteOutbox:
    """The outbox role, mixed into ``SqliteStore`` (which supplies ``_write``)."""

    if TYPE_CHECKING:
        async def _write(self, fn: Callable[Concatenate[WriteTx, P], T], *args: P.args,
                         **kwargs: P.kwargs) -> T: ...

    async def outbox_intent(self, key: ChannelKey, outbox_id: str) -> str | None:
        """See ``bot.outbox.OutboxStore.outbox_intent``."""
        return await self._write(intent, key, outbox_id)

    async def outbox_posted(self, key: ChannelKey, outbox_id: str, message_id: str, *,
                            settle: str = "") -> None:
        """See ``bot.outbox.OutboxStore.outbox_posted``."""
        await self._write(posted, key, outbox_id, message_id, settle)
