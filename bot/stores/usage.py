"""Daily token usage per account, on either backend: what quotas are checked against.

Usage is counted per UTC day and ``UsageKey`` (a user of a server, or the server itself with
``user == SERVER``); ``add_tokens`` is an atomic increment, so replicas sharing one database
count together. Each count is also kept per *kind* (what the tokens were spent on, a short
name the application chooses); the total is what limits apply to.

A limited call is admitted by a *reservation* of its largest cost (``reserve_tokens``): one
transaction reclaims the account's expired reservations, checks each limit against the
settled count plus what is already reserved, and adds the reservation to ``reserved`` (and
a row per account to ``token_reservations``, with an expiry). ``settle_tokens`` replaces it
by what the call used. So the counts plus the reservations never pass a limit, whatever
the number of callers and replicas (``bot.stores.reservations`` holds the statements).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.stores.reservations import (
    EXPIRY_INDEX,
    Account,
    Plan,
    Refused,
    reserve,
    run_postgres,
    run_sqlite,
    settle,
)
from bot.stores.schema import Ladder, Step
from bot.stores.settings import SERVER
from bot.stores.sql import numbered
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.writer import WriteTx

__all__ = ["LADDER", "PostgresUsage", "Refusal", "SqliteUsage", "UsageKey", "UsageStore"]


@dataclass(frozen=True, slots=True, order=True)
class UsageKey:
    """Whose tokens: ``user`` of (``platform``, ``workspace``), or the server (``SERVER``).
    Ordered, so that transactions touching several accounts lock them in one order."""

    platform: str
    workspace: str
    user: str = SERVER


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a reservation was refused: ``account`` has no room. ``full``: its settled count
    alone leaves none (the call cannot run today); otherwise reservations of calls still
    running are in the way, and it may fit once they settle."""

    account: UsageKey
    full: bool

    @classmethod
    def of(cls, refused: Refused | None) -> Refusal | None:
        """From what ``bot.stores.reservations`` returns."""
        if refused is None:
            return None
        account, full = refused
        assert isinstance(account, UsageKey)
        return cls(account, full)


class UsageStore(Protocol):
    """Daily token counts and the once-a-day notice of being over a quota."""

    async def add_tokens(self, day: str, accounts: Sequence[UsageKey], tokens: int, *,
                         kind: str = "") -> None:
        """Add ``tokens`` to each account's count for ``day`` (``YYYY-MM-DD`` UTC) and,
        when ``kind`` is given, to its count of that kind, in one transaction."""
        ...

    async def tokens_by_kind(self, day: str, accounts: Sequence[UsageKey]
                             ) -> dict[UsageKey, dict[str, int]]:
        """Each account's counts for ``day`` by kind (kinds with none are left out)."""
        ...

    async def tokens_used(self, day: str, accounts: Sequence[UsageKey]) -> dict[UsageKey, int]:
        """Each account's count for ``day`` (0 when none)."""
        ...

    async def claim_quota_notice(self, day: str, account: UsageKey) -> bool:
        """True once per account and day: the caller tells the person they are over."""
        ...

    async def reserve_tokens(self, day: str, limits: Mapping[UsageKey, int], tokens: int, *,
                             rid: str, now: float, expires_at: float) -> Refusal | None:
        """Reserve ``tokens`` on every account of ``limits`` for ``day``, or on none: None
        when each account's count plus its reservations plus ``tokens`` stays within its
        limit, else the ``Refusal`` of the first account that has no room. One transaction,
        which first reclaims the accounts' reservations expired at ``now``. Reserving the
        same ``rid`` again (a retry after a lost answer) admits without a second hold."""
        ...

    async def settle_tokens(self, rid: str, day: str, accounts: Sequence[UsageKey],
                            tokens: int, *, kind: str = "") -> None:
        """End reservation ``rid`` (released where it still holds) and count the
        ``tokens`` the call used on each of ``accounts`` for ``day``, in one transaction."""
        ...


LADDER = Ladder("usage", (
    Step(
        sqlite="""
        CREATE TABLE IF NOT EXISTS token_usage (
            day TEXT NOT NULL, platform TEXT NOT NULL, workspace TEXT NOT NULL,
            user_id TEXT NOT NULL, tokens INTEGER NOT NULL DEFAULT 0,
            notified INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (day, platform, workspace, user_id)
        ) WITHOUT ROWID
        """,
        postgres="""
        CREATE TABLE IF NOT EXISTS token_usage (
            day text NOT NULL, platform text NOT NULL, workspace text NOT NULL,
            user_id text NOT NULL, tokens bigint NOT NULL DEFAULT 0,
            notified boolean NOT NULL DEFAULT false,
            PRIMARY KEY (day, platform, workspace, user_id)
        )
        """,
        marker=("token_usage", "notified"),
    ),
    # Counts by kind (replies, summaries, catch-ups, digests, compaction) beside the totals;
    # counts from before this step have no kind (``/config usage`` shows them apart).
    Step(
        sqlite="""
        CREATE TABLE IF NOT EXISTS token_usage_kinds (
            day TEXT NOT NULL, platform TEXT NOT NULL, workspace TEXT NOT NULL,
            user_id TEXT NOT NULL, kind TEXT NOT NULL, tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (day, platform, workspace, user_id, kind)
        ) WITHOUT ROWID
        """,
        postgres="""
        CREATE TABLE IF NOT EXISTS token_usage_kinds (
            day text NOT NULL, platform text NOT NULL, workspace text NOT NULL,
            user_id text NOT NULL, kind text NOT NULL, tokens bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (day, platform, workspace, user_id, kind)
        )
        """,
        marker=("token_usage_kinds", "kind"),
    ),
    # Reservations: a limited call's largest cost held until it is settled (or expires).
    Step(
        sqlite=f"""
        ALTER TABLE token_usage ADD COLUMN reserved INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE IF NOT EXISTS token_reservations (
            id TEXT NOT NULL, day TEXT NOT NULL, platform TEXT NOT NULL,
            workspace TEXT NOT NULL, user_id TEXT NOT NULL, tokens INTEGER NOT NULL,
            expires_at REAL NOT NULL,
            PRIMARY KEY (id, platform, workspace, user_id)
        ) WITHOUT ROWID;
        {EXPIRY_INDEX}
        """,
        postgres=f"""
        ALTER TABLE token_usage ADD COLUMN IF NOT EXISTS reserved bigint NOT NULL DEFAULT 0;
        CREATE TABLE IF NOT EXISTS token_reservations (
            id text NOT NULL, day text NOT NULL, platform text NOT NULL,
            workspace text NOT NULL, user_id text NOT NULL, tokens bigint NOT NULL,
            expires_at double precision NOT NULL,
            PRIMARY KEY (id, platform, workspace, user_id)
        );
        {EXPIRY_INDEX}
        """,
        marker=("token_reservations", "expires_at"),
    ),
))

ADD = (
    "INSERT INTO token_usage (day, platform, workspace, user_id, tokens) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (day, platform, workspace, user_id) "
    "DO UPDATE SET tokens = token_usage.tokens + excluded.tokens"
)
ADD_KIND = (
    "INSERT INTO token_usage_kinds (day, platform, workspace, user_id, kind, tokens) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (day, platform, workspace, user_id, kind) "
    "DO UPDATE SET tokens = token_usage_kinds.tokens + excluded.tokens"
)
CLAIM_NOTICE = (
    "INSERT INTO token_usage (day, platform, workspace, user_id, notified) "
    "VALUES (?, ?, ?, ?, true) ON CONFLICT (day, platform, workspace, user_id) "
    "DO UPDATE SET notified = true WHERE token_usage.notified = false RETURNING 1"
)
_ACCOUNT = "day = ? AND platform = ? AND workspace = ? AND user_id = ?"
_USED = f"SELECT tokens FROM token_usage WHERE {_ACCOUNT}"
_BY_KIND = f"SELECT kind, tokens FROM token_usage_kinds WHERE {_ACCOUNT} ORDER BY kind"
# PostgreSQL reads every account in one statement.
_PG_ACCOUNTS = (
    "WHERE day = $1 AND (platform, workspace, user_id) IN "
    "(SELECT * FROM unnest($2::text[], $3::text[], $4::text[]))"
)
_PG_USED = f"SELECT platform, workspace, user_id, tokens FROM token_usage {_PG_ACCOUNTS}"
_PG_BY_KIND = (
    f"SELECT platform, workspace, user_id, kind, tokens FROM token_usage_kinds {_PG_ACCOUNTS} "
    "ORDER BY kind"
)


def _limits(limits: Mapping[UsageKey, int]) -> dict[Account, int]:
    return {account: limit for account, limit in limits.items()}


def _rows(day: str, accounts: Sequence[UsageKey], tokens: int) -> list[tuple[Any, ...]]:
    return [(day, a.platform, a.workspace, a.user, tokens) for a in accounts]


def _kind_rows(rows: list[tuple[Any, ...]], kind: str, tokens: int) -> list[tuple[Any, ...]]:
    return [(*r[:4], kind, tokens) for r in rows]


# ---------------------------------------------------------------------------- SQLite


def _add(tx: WriteTx, day: str, accounts: tuple[UsageKey, ...], tokens: int, kind: str) -> None:
    rows = _rows(day, accounts, tokens)
    tx.conn.executemany(ADD, rows)
    if kind:
        tx.conn.executemany(ADD_KIND, _kind_rows(rows, kind, tokens))


def _by_kind(conn: sqlite3.Connection, day: str, accounts: tuple[UsageKey, ...]
             ) -> dict[UsageKey, dict[str, int]]:
    return {a: {str(r[0]): int(r[1]) for r in conn.execute(
        _BY_KIND, (day, a.platform, a.workspace, a.user)).fetchall()} for a in accounts}


def _used(conn: sqlite3.Connection, day: str, accounts: tuple[UsageKey, ...]
          ) -> dict[UsageKey, int]:
    out = {}
    for a in accounts:
        row = conn.execute(_USED, (day, a.platform, a.workspace, a.user)).fetchone()
        out[a] = int(row[0]) if row else 0
    return out


def _claim_notice(tx: WriteTx, day: str, a: UsageKey) -> bool:
    return tx.conn.execute(CLAIM_NOTICE, (day, a.platform, a.workspace, a.user)
                           ).fetchone() is not None


class SqliteUsage:
    """``UsageStore`` on a ``SqliteStore``'s writer and readers."""

    def __init__(self, db: SqliteStore) -> None:
        self.db = db

    async def add_tokens(self, day: str, accounts: Sequence[UsageKey], tokens: int, *,
                         kind: str = "") -> None:
        """See ``UsageStore.add_tokens``."""
        if tokens > 0 and accounts:
            await self.db.write(_add, day, tuple(accounts), tokens, kind)

    async def tokens_used(self, day: str, accounts: Sequence[UsageKey]) -> dict[UsageKey, int]:
        """See ``UsageStore.tokens_used``."""
        return await self.db.read(_used, day, tuple(accounts))

    async def tokens_by_kind(self, day: str, accounts: Sequence[UsageKey]
                             ) -> dict[UsageKey, dict[str, int]]:
        """See ``UsageStore.tokens_by_kind``."""
        return await self.db.read(_by_kind, day, tuple(accounts))

    async def claim_quota_notice(self, day: str, account: UsageKey) -> bool:
        """See ``UsageStore.claim_quota_notice``."""
        return await self.db.write(_claim_notice, day, account)

    async def reserve_tokens(self, day: str, limits: Mapping[UsageKey, int], tokens: int, *,
                             rid: str, now: float, expires_at: float) -> Refusal | None:
        """See ``UsageStore.reserve_tokens``."""
        plan = Plan(rid, day, _limits(limits), tokens, now, expires_at)
        if (early := plan.too_big()) is not None:
            return Refusal.of(early)
        return Refusal.of(await self.db.write(lambda tx: run_sqlite(tx.conn, reserve(plan))))

    async def settle_tokens(self, rid: str, day: str, accounts: Sequence[UsageKey],
                            tokens: int, *, kind: str = "") -> None:
        """See ``UsageStore.settle_tokens``."""
        await self.db.write(lambda tx: run_sqlite(
            tx.conn, settle(rid, day, tuple(accounts), tokens, kind)))


# ---------------------------------------------------------------------------- PostgreSQL


def _columns(day: str, accounts: Sequence[UsageKey]) -> tuple[Any, ...]:
    return (day, [a.platform for a in accounts], [a.workspace for a in accounts],
            [a.user for a in accounts])


class PostgresUsage:
    """``UsageStore`` on a ``PostgresStore``'s pool."""

    def __init__(self, db: Any) -> None:
        self.db = db

    async def add_tokens(self, day: str, accounts: Sequence[UsageKey], tokens: int, *,
                         kind: str = "") -> None:
        """See ``UsageStore.add_tokens``."""
        if tokens <= 0 or not accounts:
            return
        rows = _rows(day, sorted(accounts), tokens)  # rows locked in one order (reservations)

        async def run(conn: Any) -> None:
            await conn.executemany(numbered(ADD), rows)
            if kind:
                await conn.executemany(numbered(ADD_KIND), _kind_rows(rows, kind, tokens))

        await self.db.tx(run)

    async def tokens_by_kind(self, day: str, accounts: Sequence[UsageKey]
                             ) -> dict[UsageKey, dict[str, int]]:
        """See ``UsageStore.tokens_by_kind``."""
        out: dict[UsageKey, dict[str, int]] = {a: {} for a in accounts}
        if accounts:
            for r in await self.db.fetch(_PG_BY_KIND, *_columns(day, accounts)):
                out[UsageKey(r[0], r[1], r[2])][str(r[3])] = int(r[4])
        return out

    async def tokens_used(self, day: str, accounts: Sequence[UsageKey]) -> dict[UsageKey, int]:
        """See ``UsageStore.tokens_used``."""
        out = {a: 0 for a in accounts}
        if accounts:
            for r in await self.db.fetch(_PG_USED, *_columns(day, accounts)):
                out[UsageKey(r[0], r[1], r[2])] = int(r[3])
        return out

    async def claim_quota_notice(self, day: str, account: UsageKey) -> bool:
        """See ``UsageStore.claim_quota_notice``."""
        return bool(await self.db.fetch(numbered(CLAIM_NOTICE), day, account.platform,
                                        account.workspace, account.user))

    async def reserve_tokens(self, day: str, limits: Mapping[UsageKey, int], tokens: int, *,
                             rid: str, now: float, expires_at: float) -> Refusal | None:
        """See ``UsageStore.reserve_tokens``."""
        plan = Plan(rid, day, _limits(limits), tokens, now, expires_at)
        if (early := plan.too_big()) is not None:
            return Refusal.of(early)
        return Refusal.of(await self.db.tx(lambda conn: run_postgres(conn, reserve(plan))))

    async def settle_tokens(self, rid: str, day: str, accounts: Sequence[UsageKey],
                            tokens: int, *, kind: str = "") -> None:
        """See ``UsageStore.settle_tokens``."""
        await self.db.tx(lambda conn: run_postgres(
            conn, settle(rid, day, tuple(accounts), tokens, kind)))
