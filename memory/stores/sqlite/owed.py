"""SQLite side of ``ReplyLedger``: replies owed to addressed messages (schema step 6;
the placeholder column: the outbox step).

Writes run in the writer's batch transaction like every other write, so a claim is one
conditional ``UPDATE`` and two processes sharing the file never both win it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from memory.models import ChannelKey, OwedReply, Turn
from memory.stores.common import positive_ttl
from memory.stores.sqlite.writer import WriteTx

P = ParamSpec("P")
T = TypeVar("T")

__all__ = [
    "SqliteOwed",
    "claim_due",
    "claim_owed",
    "expire_owed",
    "owe",
    "owed_placeholder",
    "release_owed",
    "renew_owed",
    "settle_owed",
]

_COLS = "platform, workspace, channel, message_id, seq, sent_at, route, attempts, placeholder"
_KEY = "platform = ? AND workspace = ? AND channel = ? AND message_id = ?"


def _row(row: Sequence[Any]) -> OwedReply:
    platform, workspace, channel, mid, seq, sent_at, route, attempts, placeholder = row
    return OwedReply(ChannelKey(platform, workspace, channel), mid, int(seq), float(sent_at),
                     route, int(attempts), placeholder)


def owe(tx: WriteTx, stored: Turn, owner: str, claim_seconds: float, route: str) -> None:
    """Record the debt of a just-created turn (called inside ``record``'s savepoint)."""
    k = stored.key
    until = time.time() + claim_seconds if owner else 0.0
    tx.conn.execute(
        "INSERT OR IGNORE INTO owed_replies (platform, workspace, channel, message_id, seq, "
        "sent_at, route, owner, claimed_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (k.platform, k.workspace, k.channel, stored.message_id, stored.seq, stored.sent_at,
         route, owner, until),
    )


def claim_owed(
    tx: WriteTx, key: ChannelKey, message_id: str, owner: str, claim_seconds: float
) -> OwedReply | None:
    """Claim one debt if its claim ran out or is ``owner``'s own."""
    now = time.time()
    row = tx.conn.execute(
        f"UPDATE owed_replies SET owner = ?, claimed_until = ?, attempts = attempts + 1 "
        f"WHERE {_KEY} AND (claimed_until <= ? OR owner = ?) RETURNING {_COLS}",
        (owner, now + claim_seconds, key.platform, key.workspace, key.channel, message_id,
         now, owner),
    ).fetchone()
    return None if row is None else _row(row)


def claim_due(
    tx: WriteTx, platform: str, owner: str, claim_seconds: float, since: float, limit: int
) -> list[OwedReply]:
    """Claim the oldest debts of ``platform`` whose claim ran out, sent at or after ``since``."""
    now = time.time()
    rows = tx.conn.execute(
        f"UPDATE owed_replies SET owner = ?, claimed_until = ?, attempts = attempts + 1 "
        f"WHERE (platform, workspace, channel, message_id) IN ("
        f"  SELECT platform, workspace, channel, message_id FROM owed_replies "
        f"  WHERE platform = ? AND claimed_until <= ? AND sent_at >= ? "
        f"  ORDER BY sent_at LIMIT ?) RETURNING {_COLS}",
        (owner, now + claim_seconds, platform, now, since, limit),
    ).fetchall()
    return sorted((_row(r) for r in rows), key=lambda o: o.sent_at)


def renew_owed(
    tx: WriteTx, owner: str, items: Sequence[tuple[ChannelKey, str]], claim_seconds: float
) -> int:
    """Extend ``owner``'s live claims on ``items``."""
    now = time.time()
    held = 0
    for key, mid in items:
        held += tx.conn.execute(
            f"UPDATE owed_replies SET claimed_until = ? WHERE {_KEY} AND owner = ? "
            f"AND claimed_until > ?",
            (now + claim_seconds, key.platform, key.workspace, key.channel, mid, owner, now),
        ).rowcount
    return held


def release_owed(tx: WriteTx, key: ChannelKey, message_id: str, owner: str) -> bool:
    """Make ``owner``'s claimed debt due again now."""
    return tx.conn.execute(
        f"UPDATE owed_replies SET claimed_until = 0 WHERE {_KEY} AND owner = ?",
        (key.platform, key.workspace, key.channel, message_id, owner),
    ).rowcount == 1


def settle_owed(tx: WriteTx, key: ChannelKey, message_id: str) -> bool:
    """Delete a delivered debt."""
    return tx.conn.execute(
        f"DELETE FROM owed_replies WHERE {_KEY}",
        (key.platform, key.workspace, key.channel, message_id),
    ).rowcount == 1


def owed_placeholder(
    tx: WriteTx, key: ChannelKey, message_id: str, owner: str, placeholder: str
) -> bool:
    """Remember the message ``owner`` shows meanwhile on the debt it holds."""
    return tx.conn.execute(
        f"UPDATE owed_replies SET placeholder = ? WHERE {_KEY} AND owner = ?",
        (placeholder, key.platform, key.workspace, key.channel, message_id, owner),
    ).rowcount == 1


def expire_owed(tx: WriteTx, platform: str, before: float, max_attempts: int) -> list[OwedReply]:
    """Delete and return unclaimed debts that are too old or were tried too often."""
    rows = tx.conn.execute(
        f"DELETE FROM owed_replies WHERE platform = ? AND claimed_until <= ? "
        f"AND (sent_at < ? OR attempts >= ?) RETURNING {_COLS}",
        (platform, time.time(), before, max_attempts),
    ).fetchall()
    return sorted((_row(r) for r in rows), key=lambda o: o.sent_at)


class SqliteOwed:
    """The reply ledger role (``ReplyLedger``), mixed into ``SqliteStore`` (which supplies
    ``_write``); the functions above run inside its write transactions."""

    if TYPE_CHECKING:
        async def _write(self, fn: Callable[Concatenate[WriteTx, P], T], *args: P.args,
                         **kwargs: P.kwargs) -> T: ...

    async def claim_owed(
        self, key: ChannelKey, message_id: str, owner: str, claim_seconds: float
    ) -> OwedReply | None:
        """Claim this message's open debt (see ``ReplyLedger.claim_owed``)."""
        return await self._write(claim_owed, key, message_id, owner,
                                 positive_ttl(claim_seconds))

    async def claim_due(
        self, platform: str, owner: str, claim_seconds: float, *, since: float, limit: int = 20
    ) -> list[OwedReply]:
        """Claim debts whose claim ran out (see ``ReplyLedger.claim_due``)."""
        return await self._write(claim_due, platform, owner, positive_ttl(claim_seconds),
                                 since, limit)

    async def renew_owed(
        self, owner: str, items: Sequence[tuple[ChannelKey, str]], claim_seconds: float
    ) -> int:
        """Extend ``owner``'s live claims."""
        if not items:
            return 0
        return await self._write(renew_owed, owner, tuple(items),
                                 positive_ttl(claim_seconds))

    async def release_owed(self, key: ChannelKey, message_id: str, owner: str) -> bool:
        """Make ``owner``'s claimed debt due again."""
        return await self._write(release_owed, key, message_id, owner)

    async def settle_owed(self, key: ChannelKey, message_id: str) -> bool:
        """Delete a delivered debt."""
        return await self._write(settle_owed, key, message_id)

    async def expire_owed(
        self, platform: str, *, before: float, max_attempts: int
    ) -> list[OwedReply]:
        """Delete and return debts too old or tried too often."""
        return await self._write(expire_owed, platform, before, max_attempts)

    async def owed_placeholder(
        self, key: ChannelKey, message_id: str, owner: str, placeholder: str
    ) -> bool:
        """Remember the placeholder shown for a debt (see ``ReplyLedger``)."""
        return await self._write(owed_placeholder, key, message_id, owner, placeholder)
