"""PostgreSQL side of the outbox (``bot.outbox.OutboxStore``): each outgoing post's
intent, then the platform's id of it (schema step 10).

The delivery of a reply's last message and the settling of its debt are one transaction,
so a crash leaves either both or neither: never a delivered answer still owed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from memory.models import ChannelKey
from memory.stores.postgres.owed import SETTLE_OWED, by_owed_key

T = TypeVar("T")
Conn = Any  # an asyncpg connection

__all__ = ["KEEP_SECONDS", "PostgresOutbox"]

KEEP_SECONDS = 7 * 86400.0  # an outbox row outlives every retry of its post
_NOW = "extract(epoch from clock_timestamp())"
_INTENT = (
    "INSERT INTO outbox (id, platform, workspace, channel, created_at) "
    f"VALUES ($1, $2, $3, $4, {_NOW}) ON CONFLICT (id) DO NOTHING RETURNING id"
)
_POSTED = (
    "INSERT INTO outbox (id, platform, workspace, channel, created_at, message_id) "
    f"VALUES ($1, $2, $3, $4, {_NOW}, $5) "
    "ON CONFLICT (id) DO UPDATE SET message_id = excluded.message_id"
)


class PostgresOutbox:
    """The outbox role, mixed into ``PostgresStore`` (which supplies ``_tx``)."""

    if TYPE_CHECKING:
        async def _tx(self, fn: Callable[[Conn], Awaitable[T]], *, read: bool = False) -> T: ...

    async def outbox_intent(self, key: ChannelKey, outbox_id: str) -> str | None:
        """See ``bot.outbox.OutboxStore.outbox_intent``."""

        async def run(conn: Conn) -> str | None:
            if await conn.fetchval(_INTENT, outbox_id, key.platform, key.workspace,
                                   key.channel) is not None:
                await conn.execute(f"DELETE FROM outbox WHERE created_at < {_NOW} - $1",
                                   KEEP_SECONDS)
                return None
            found = await conn.fetchval("SELECT message_id FROM outbox WHERE id = $1", outbox_id)
            return str(found or "")

        return await self._tx(run)

    async def outbox_posted(self, key: ChannelKey, outbox_id: str, message_id: str, *,
                            settle: str = "") -> None:
        """See ``bot.outbox.OutboxStore.outbox_posted``."""

        async def run(conn: Conn) -> None:
            await conn.execute(_POSTED, outbox_id, key.platform, key.workspace, key.channel,
                               message_id)
            if settle:
                await conn.execute(SETTLE_OWED, *by_owed_key(key, settle))

        await self._tx(run)
