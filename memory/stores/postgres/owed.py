"""PostgreSQL side of ``ReplyLedger``: replies owed to addressed messages (schema step 5;
the placeholder column: the outbox step).

Claims are conditional ``UPDATE … RETURNING`` statements on the database clock: under READ
COMMITTED a second replica's update waits for the first and re-checks the condition, so a
debt has one winner; ``claim_due`` picks its rows ``FOR UPDATE SKIP LOCKED``, so replicas
sweeping together split the work instead of queueing on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from memory.models import ChannelKey, OwedReply, Turn
from memory.stores.common import positive_ttl

T = TypeVar("T")
Conn = Any  # an asyncpg connection

__all__ = [
    "CLAIM_DUE",
    "CLAIM_OWED",
    "EXPIRE_OWED",
    "OWE",
    "OWED_PLACEHOLDER",
    "RELEASE_OWED",
    "RENEW_OWED",
    "SETTLE_OWED",
    "PostgresOwed",
    "owe_values",
    "owed_row",
]

_NOW = "extract(epoch from clock_timestamp())"
_COLS = "platform, workspace, channel, message_id, seq, sent_at, route, attempts, placeholder"
_KEY = "platform = $1 AND workspace = $2 AND channel = $3 AND message_id = $4"

OWE = (
    "INSERT INTO owed_replies (platform, workspace, channel, message_id, seq, sent_at, route, "
    f"owner, claimed_until) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
    f"CASE WHEN $8 = '' THEN 0 ELSE {_NOW} + $9 END) ON CONFLICT DO NOTHING"
)
CLAIM_OWED = (
    f"UPDATE owed_replies SET owner = $5, claimed_until = {_NOW} + $6, attempts = attempts + 1 "
    f"WHERE {_KEY} AND (claimed_until <= {_NOW} OR owner = $5) RETURNING {_COLS}"
)
CLAIM_DUE = (
    f"UPDATE owed_replies o SET owner = $2, claimed_until = {_NOW} + $3, "
    "attempts = o.attempts + 1 FROM ("
    "  SELECT platform, workspace, channel, message_id FROM owed_replies "
    f"  WHERE platform = $1 AND claimed_until <= {_NOW} AND sent_at >= $4 "
    "  ORDER BY sent_at LIMIT $5 FOR UPDATE SKIP LOCKED) d "
    "WHERE (o.platform, o.workspace, o.channel, o.message_id) = "
    "(d.platform, d.workspace, d.channel, d.message_id) "
    "RETURNING o.platform, o.workspace, o.channel, o.message_id, o.seq, o.sent_at, o.route, "
    "o.attempts, o.placeholder"
)
RENEW_OWED = (
    f"UPDATE owed_replies SET claimed_until = {_NOW} + $6 WHERE {_KEY} AND owner = $5 "
    f"AND claimed_until > {_NOW}"
)
OWED_PLACEHOLDER = (
    f"UPDATE owed_replies SET placeholder = $6 WHERE {_KEY} AND owner = $5 RETURNING seq"
)
RELEASE_OWED = f"UPDATE owed_replies SET claimed_until = 0 WHERE {_KEY} AND owner = $5"
SETTLE_OWED = f"DELETE FROM owed_replies WHERE {_KEY} RETURNING seq"
EXPIRE_OWED = (
    f"DELETE FROM owed_replies WHERE platform = $1 AND claimed_until <= {_NOW} "
    f"AND (sent_at < $2 OR attempts >= $3) RETURNING {_COLS}"
)


def owe_values(stored: Turn, owner: str, claim_seconds: float, route: str) -> tuple[Any, ...]:
    """The parameters of ``OWE`` for a just-created turn."""
    k = stored.key
    return (k.platform, k.workspace, k.channel, stored.message_id, stored.seq,
            stored.sent_at, route, owner, float(claim_seconds))


def owed_row(row: Sequence[Any]) -> OwedReply:
    """An ``OwedReply`` from a row in ``_COLS`` order."""
    platform, workspace, channel, mid, seq, sent_at, route, attempts, placeholder = row
    return OwedReply(ChannelKey(platform, workspace, channel), mid, int(seq), float(sent_at),
                     route, int(attempts), placeholder)


def by_owed_key(key: ChannelKey, message_id: str) -> tuple[str, str, str, str]:
    """``$1 … $4`` of the statements that name one debt."""
    return key.platform, key.workspace, key.channel, message_id


class PostgresOwed:
    """The reply ledger role (``ReplyLedger``), mixed into ``PostgresStore`` (which supplies
    ``_fetch`` and ``_tx``)."""

    if TYPE_CHECKING:
        async def _tx(self, fn: Callable[[Conn], Awaitable[T]], *, read: bool = False) -> T: ...

        async def _fetch(self, sql: str, *args: Any) -> list[Any]: ...

    async def claim_owed(
        self, key: ChannelKey, message_id: str, owner: str, claim_seconds: float
    ) -> OwedReply | None:
        """Claim this message's open debt (see ``ReplyLedger.claim_owed``)."""
        rows = await self._fetch(CLAIM_OWED, *by_owed_key(key, message_id), owner,
                                 positive_ttl(claim_seconds))
        return owed_row(rows[0]) if rows else None

    async def claim_due(
        self, platform: str, owner: str, claim_seconds: float, *, since: float, limit: int = 20
    ) -> list[OwedReply]:
        """Claim debts whose claim ran out (see ``ReplyLedger.claim_due``)."""
        rows = await self._fetch(CLAIM_DUE, platform, owner, positive_ttl(claim_seconds),
                                 float(since), limit)
        return sorted((owed_row(r) for r in rows), key=lambda o: o.sent_at)

    async def renew_owed(
        self, owner: str, items: Sequence[tuple[ChannelKey, str]], claim_seconds: float
    ) -> int:
        """Extend ``owner``'s live claims."""
        ttl = positive_ttl(claim_seconds)

        async def run(conn: Conn) -> int:
            held = 0
            for key, mid in items:
                status = await conn.execute(RENEW_OWED, *by_owed_key(key, mid),
                                            owner, ttl)
                held += int(status.split()[-1])
            return held

        return await self._tx(run) if items else 0

    async def release_owed(self, key: ChannelKey, message_id: str, owner: str) -> bool:
        """Make ``owner``'s claimed debt due again."""
        sql = RELEASE_OWED + " RETURNING seq"
        return bool(await self._fetch(sql, *by_owed_key(key, message_id), owner))

    async def settle_owed(self, key: ChannelKey, message_id: str) -> bool:
        """Delete a delivered debt."""
        return bool(await self._fetch(SETTLE_OWED, *by_owed_key(key, message_id)))

    async def expire_owed(
        self, platform: str, *, before: float, max_attempts: int
    ) -> list[OwedReply]:
        """Delete and return debts too old or tried too often."""
        rows = await self._fetch(EXPIRE_OWED, platform, float(before), max_attempts)
        return sorted((owed_row(r) for r in rows), key=lambda o: o.sent_at)

    async def owed_placeholder(
        self, key: ChannelKey, message_id: str, owner: str, placeholder: str
    ) -> bool:
        """Remember the placeholder shown for a debt (see ``ReplyLedger``)."""
        return bool(await self._fetch(OWED_PLACEHOLDER, *by_owed_key(key, message_id),
                                      owner, placeholder))
