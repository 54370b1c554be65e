"""Replies owed to addressed messages (``ReplyLedger``), so a crash or a failed delivery
never leaves a mention unanswered, and two replicas never both answer one.

A ``NewTurn`` whose ``extra`` is a ``ReplyDue`` records its debt in the turn's own
transaction, only when the turn is created (the hook this role adds to the memory store's
``on_record``). The debt is claimed by one process at a time (``owner`` until
``claimed_until``); it is deleted when the answer was delivered (``settle_owed``) or given
up (``expire_owed``), so open debts stay few. SQLite claims run in the writer's batch, on
the process clock; PostgreSQL's are conditional ``UPDATE … RETURNING`` statements on the
database clock, and ``claim_due`` picks its rows ``FOR UPDATE SKIP LOCKED``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from bot.stores.schema import Ladder, Step
from bot.stores.sql import numbered
from memory.models import ChannelKey, Turn
from memory.stores.common import positive_ttl
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.writer import WriteTx

__all__ = [
    "LADDER", "SETTLE", "OwedReply", "PostgresOwed", "ReplyDue", "ReplyLedger", "SqliteOwed",
    "by_debt",
]


@dataclass(frozen=True, slots=True)
class ReplyDue:
    """A reply owed to a turn being recorded (its ``NewTurn.extra``), stored in the turn's
    own transaction, so a crash never leaves an addressed message recorded but forgotten.

    ``owner`` is the process answering it now, its claim lasting ``claim_seconds`` unless
    renewed (``""``: nobody yet, any replica may claim it). ``route`` is whatever the adapter
    needs to deliver the answer later (Slack: the thread's ts).
    """

    owner: str
    claim_seconds: float
    route: str = ""


@dataclass(frozen=True, slots=True)
class OwedReply:
    """An addressed message whose reply was not delivered yet.

    ``placeholder`` is the platform id of the message shown meanwhile ("thinking…", a
    streamed start), ``""`` when none was posted: a late answer replaces it.
    """

    key: ChannelKey
    message_id: str
    seq: int
    sent_at: float
    route: str
    attempts: int
    placeholder: str = ""


@runtime_checkable
class ReplyLedger(Protocol):
    """Open debts: claimed once, renewed, released, settled or expired."""

    async def claim_owed(
        self, key: ChannelKey, message_id: str, owner: str, claim_seconds: float
    ) -> OwedReply | None:
        """Claim this message's open debt for ``owner`` if nobody holds a live claim on it
        (or ``owner`` itself does); None when nothing is owed or another holds it."""

    async def claim_due(
        self, platform: str, owner: str, claim_seconds: float, *, since: float, limit: int = 20
    ) -> list[OwedReply]:
        """Claim up to ``limit`` open debts of ``platform`` sent at or after ``since`` whose
        claim ran out (oldest first), counting an attempt on each; one winner per debt."""

    async def renew_owed(
        self, owner: str, items: Sequence[tuple[ChannelKey, str]], claim_seconds: float
    ) -> int:
        """Extend ``owner``'s live claims on these debts; how many it still held."""

    async def release_owed(self, key: ChannelKey, message_id: str, owner: str) -> bool:
        """Give up ``owner``'s claim (the answer could not be delivered): due again now."""

    async def settle_owed(self, key: ChannelKey, message_id: str) -> bool:
        """The answer was delivered: delete the debt. False if none was open."""

    async def owed_placeholder(
        self, key: ChannelKey, message_id: str, owner: str, placeholder: str
    ) -> bool:
        """Remember the platform id of the message ``owner`` shows while answering
        ("thinking…"), so a late answer replaces it. False unless ``owner`` holds the debt."""

    async def expire_owed(
        self, platform: str, *, before: float, max_attempts: int
    ) -> list[OwedReply]:
        """Delete and return ``platform``'s unclaimed debts sent before ``before`` or tried
        ``max_attempts`` times: too old (or too broken) to answer now."""


LADDER = Ladder("owed", (
    Step(
        sqlite="""
        CREATE TABLE IF NOT EXISTS owed_replies (
            platform TEXT NOT NULL, workspace TEXT NOT NULL, channel TEXT NOT NULL,
            message_id TEXT NOT NULL, seq INTEGER NOT NULL, sent_at REAL NOT NULL,
            route TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '',
            claimed_until REAL NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (platform, workspace, channel, message_id)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS owed_replies_due ON owed_replies (platform, claimed_until);
        """,
        postgres="""
        CREATE TABLE IF NOT EXISTS owed_replies (
            platform text NOT NULL, workspace text NOT NULL, channel text NOT NULL,
            message_id text NOT NULL, seq bigint NOT NULL, sent_at double precision NOT NULL,
            route text NOT NULL DEFAULT '', owner text NOT NULL DEFAULT '',
            claimed_until double precision NOT NULL DEFAULT 0,
            attempts integer NOT NULL DEFAULT 0,
            PRIMARY KEY (platform, workspace, channel, message_id)
        );
        CREATE INDEX IF NOT EXISTS owed_replies_due ON owed_replies (platform, claimed_until);
        """,
        marker=("owed_replies", "seq"),
    ),
    # The placeholder a debt showed meanwhile, which its late answer replaces.
    Step(
        sqlite="ALTER TABLE owed_replies ADD COLUMN placeholder TEXT NOT NULL DEFAULT ''",
        postgres="ALTER TABLE owed_replies ADD COLUMN IF NOT EXISTS placeholder text NOT NULL "
                 "DEFAULT ''",
        marker=("owed_replies", "placeholder"),
    ),
))

_COLS = "platform, workspace, channel, message_id, seq, sent_at, route, attempts, placeholder"
_DEBT = "platform = ? AND workspace = ? AND channel = ? AND message_id = ?"
_PG_DEBT = "platform = $1 AND workspace = $2 AND channel = $3 AND message_id = $4"
SETTLE = f"DELETE FROM owed_replies WHERE {_DEBT}"
"""Deletes one debt (the outbox settles it with the post that delivers the answer)."""
_PG_NOW = "extract(epoch from clock_timestamp())"


def by_debt(key: ChannelKey, message_id: str) -> tuple[str, str, str, str]:
    """The parameters that name one debt (``SETTLE``'s)."""
    return key.platform, key.workspace, key.channel, message_id


def _row(row: Sequence[Any]) -> OwedReply:
    platform, workspace, channel, mid, seq, sent_at, route, attempts, placeholder = row
    return OwedReply(ChannelKey(platform, workspace, channel), mid, int(seq), float(sent_at),
                     route, int(attempts), placeholder)


def _oldest(rows: Sequence[Sequence[Any]]) -> list[OwedReply]:
    return sorted((_row(r) for r in rows), key=lambda o: o.sent_at)


# ---------------------------------------------------------------------------- SQLite


def _owe(tx: WriteTx, stored: Turn, extra: object) -> None:
    """Record the debt of a just-created turn (``SqliteStore.on_record``)."""
    if not isinstance(extra, ReplyDue):
        return
    until = time.time() + extra.claim_seconds if extra.owner else 0.0
    tx.conn.execute(
        "INSERT OR IGNORE INTO owed_replies (platform, workspace, channel, message_id, seq, "
        "sent_at, route, owner, claimed_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*by_debt(stored.key, stored.message_id), stored.seq, stored.sent_at, extra.route,
         extra.owner, until),
    )


def _claim_owed(tx: WriteTx, key: ChannelKey, message_id: str, owner: str, ttl: float
                ) -> OwedReply | None:
    now = time.time()
    row = tx.conn.execute(
        f"UPDATE owed_replies SET owner = ?, claimed_until = ?, attempts = attempts + 1 "
        f"WHERE {_DEBT} AND (claimed_until <= ? OR owner = ?) RETURNING {_COLS}",
        (owner, now + ttl, *by_debt(key, message_id), now, owner),
    ).fetchone()
    return None if row is None else _row(row)


def _claim_due(tx: WriteTx, platform: str, owner: str, ttl: float, since: float, limit: int
               ) -> list[OwedReply]:
    now = time.time()
    return _oldest(tx.conn.execute(
        f"UPDATE owed_replies SET owner = ?, claimed_until = ?, attempts = attempts + 1 "
        f"WHERE (platform, workspace, channel, message_id) IN ("
        f"  SELECT platform, workspace, channel, message_id FROM owed_replies "
        f"  WHERE platform = ? AND claimed_until <= ? AND sent_at >= ? "
        f"  ORDER BY sent_at LIMIT ?) RETURNING {_COLS}",
        (owner, now + ttl, platform, now, since, limit),
    ).fetchall())


def _renew(tx: WriteTx, owner: str, items: Sequence[tuple[ChannelKey, str]], ttl: float) -> int:
    now = time.time()
    return sum(tx.conn.execute(
        f"UPDATE owed_replies SET claimed_until = ? WHERE {_DEBT} AND owner = ? "
        "AND claimed_until > ?", (now + ttl, *by_debt(key, mid), owner, now),
    ).rowcount for key, mid in items)


def _changed(tx: WriteTx, sql: str, args: tuple[Any, ...]) -> bool:
    return tx.conn.execute(sql, args).rowcount == 1


def _expire(tx: WriteTx, platform: str, before: float, max_attempts: int) -> list[OwedReply]:
    return _oldest(tx.conn.execute(
        f"DELETE FROM owed_replies WHERE platform = ? AND claimed_until <= ? "
        f"AND (sent_at < ? OR attempts >= ?) RETURNING {_COLS}",
        (platform, time.time(), before, max_attempts),
    ).fetchall())


_RELEASE = f"UPDATE owed_replies SET claimed_until = 0 WHERE {_DEBT} AND owner = ?"
_PLACEHOLDER = f"UPDATE owed_replies SET placeholder = ? WHERE {_DEBT} AND owner = ?"


class SqliteOwed:
    """``ReplyLedger`` on a ``SqliteStore``'s writer; adds the debt hook to its records."""

    def __init__(self, db: SqliteStore) -> None:
        self.db = db
        db.on_record.append(_owe)

    async def claim_owed(
        self, key: ChannelKey, message_id: str, owner: str, claim_seconds: float
    ) -> OwedReply | None:
        """See ``ReplyLedger.claim_owed``."""
        return await self.db.write(_claim_owed, key, message_id, owner,
                                   positive_ttl(claim_seconds))

    async def claim_due(
        self, platform: str, owner: str, claim_seconds: float, *, since: float, limit: int = 20
    ) -> list[OwedReply]:
        """See ``ReplyLedger.claim_due``."""
        return await self.db.write(_claim_due, platform, owner, positive_ttl(claim_seconds),
                                   since, limit)

    async def renew_owed(
        self, owner: str, items: Sequence[tuple[ChannelKey, str]], claim_seconds: float
    ) -> int:
        """See ``ReplyLedger.renew_owed``."""
        if not items:
            return 0
        return await self.db.write(_renew, owner, tuple(items), positive_ttl(claim_seconds))

    async def release_owed(self, key: ChannelKey, message_id: str, owner: str) -> bool:
        """See ``ReplyLedger.release_owed``."""
        return await self.db.write(_changed, _RELEASE, (*by_debt(key, message_id), owner))

    async def settle_owed(self, key: ChannelKey, message_id: str) -> bool:
        """See ``ReplyLedger.settle_owed``."""
        return await self.db.write(_changed, SETTLE, by_debt(key, message_id))

    async def expire_owed(
        self, platform: str, *, before: float, max_attempts: int
    ) -> list[OwedReply]:
        """See ``ReplyLedger.expire_owed``."""
        return await self.db.write(_expire, platform, before, max_attempts)

    async def owed_placeholder(
        self, key: ChannelKey, message_id: str, owner: str, placeholder: str
    ) -> bool:
        """See ``ReplyLedger.owed_placeholder``."""
        return await self.db.write(_changed, _PLACEHOLDER,
                                   (placeholder, *by_debt(key, message_id), owner))


# ---------------------------------------------------------------------------- PostgreSQL

_PG_OWE = (
    "INSERT INTO owed_replies (platform, workspace, channel, message_id, seq, sent_at, route, "
    "owner, claimed_until) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
    f"CASE WHEN $8 = '' THEN 0 ELSE {_PG_NOW} + $9 END) ON CONFLICT DO NOTHING"
)
_PG_CLAIM_OWED = (
    f"UPDATE owed_replies SET owner = $5, claimed_until = {_PG_NOW} + $6, "
    f"attempts = attempts + 1 WHERE {_PG_DEBT} AND (claimed_until <= {_PG_NOW} OR owner = $5) "
    f"RETURNING {_COLS}"
)
_PG_CLAIM_DUE = (
    f"UPDATE owed_replies o SET owner = $2, claimed_until = {_PG_NOW} + $3, "
    "attempts = o.attempts + 1 FROM ("
    "  SELECT platform, workspace, channel, message_id FROM owed_replies "
    f"  WHERE platform = $1 AND claimed_until <= {_PG_NOW} AND sent_at >= $4 "
    "  ORDER BY sent_at LIMIT $5 FOR UPDATE SKIP LOCKED) d "
    "WHERE (o.platform, o.workspace, o.channel, o.message_id) = "
    "(d.platform, d.workspace, d.channel, d.message_id) "
    "RETURNING o.platform, o.workspace, o.channel, o.message_id, o.seq, o.sent_at, o.route, "
    "o.attempts, o.placeholder"
)
_PG_RENEW = (
    f"UPDATE owed_replies SET claimed_until = {_PG_NOW} + $6 WHERE {_PG_DEBT} AND owner = $5 "
    f"AND claimed_until > {_PG_NOW}"
)
_PG_PLACEHOLDER = (
    f"UPDATE owed_replies SET placeholder = $6 WHERE {_PG_DEBT} AND owner = $5 RETURNING seq"
)
_PG_RELEASE = numbered(_RELEASE) + " RETURNING seq"
_PG_SETTLE = numbered(SETTLE) + " RETURNING seq"
_PG_EXPIRE = (
    f"DELETE FROM owed_replies WHERE platform = $1 AND claimed_until <= {_PG_NOW} "
    f"AND (sent_at < $2 OR attempts >= $3) RETURNING {_COLS}"
)


async def _pg_owe(conn: Any, stored: Turn, extra: object) -> None:
    """Record the debt of a just-created turn (``PostgresStore.on_record``)."""
    if isinstance(extra, ReplyDue):
        await conn.execute(_PG_OWE, *by_debt(stored.key, stored.message_id), stored.seq,
                           stored.sent_at, extra.route, extra.owner, float(extra.claim_seconds))


class PostgresOwed:
    """``ReplyLedger`` on a ``PostgresStore``'s pool; adds the debt hook to its records."""

    def __init__(self, db: Any) -> None:
        self.db = db
        db.on_record.append(_pg_owe)

    async def claim_owed(
        self, key: ChannelKey, message_id: str, owner: str, claim_seconds: float
    ) -> OwedReply | None:
        """See ``ReplyLedger.claim_owed``."""
        rows = await self.db.fetch(_PG_CLAIM_OWED, *by_debt(key, message_id), owner,
                                   positive_ttl(claim_seconds))
        return _row(rows[0]) if rows else None

    async def claim_due(
        self, platform: str, owner: str, claim_seconds: float, *, since: float, limit: int = 20
    ) -> list[OwedReply]:
        """See ``ReplyLedger.claim_due``."""
        return _oldest(await self.db.fetch(_PG_CLAIM_DUE, platform, owner,
                                           positive_ttl(claim_seconds), float(since), limit))

    async def renew_owed(
        self, owner: str, items: Sequence[tuple[ChannelKey, str]], claim_seconds: float
    ) -> int:
        """See ``ReplyLedger.renew_owed``."""
        ttl = positive_ttl(claim_seconds)

        async def run(conn: Any) -> int:
            held = 0
            for key, mid in items:
                status = await conn.execute(_PG_RENEW, *by_debt(key, mid), owner, ttl)
                held += int(status.split()[-1])
            return held

        return int(await self.db.tx(run)) if items else 0

    async def release_owed(self, key: ChannelKey, message_id: str, owner: str) -> bool:
        """See ``ReplyLedger.release_owed``."""
        return bool(await self.db.fetch(_PG_RELEASE, *by_debt(key, message_id), owner))

    async def settle_owed(self, key: ChannelKey, message_id: str) -> bool:
        """See ``ReplyLedger.settle_owed``."""
        return bool(await self.db.fetch(_PG_SETTLE, *by_debt(key, message_id)))

    async def expire_owed(
        self, platform: str, *, before: float, max_attempts: int
    ) -> list[OwedReply]:
        """See ``ReplyLedger.expire_owed``."""
        return _oldest(await self.db.fetch(_PG_EXPIRE, platform, float(before), max_attempts))

    async def owed_placeholder(
        self, key: ChannelKey, message_id: str, owner: str, placeholder: str
    ) -> bool:
        """See ``ReplyLedger.owed_placeholder``."""
        return bool(await self.db.fetch(_PG_PLACEHOLDER, *by_debt(key, message_id), owner,
                                        placeholder))
