"""Reservations of token budget: the statements behind ``UsageStore.reserve_tokens`` and
``settle_tokens``, written once and run on either backend.

A reservation holds a call's largest cost on each limited account (``token_usage.reserved``,
plus one ``token_reservations`` row per account that remembers the amount, the day and an
expiry). Admission is a conditional upsert per account — ``reserved`` grows only while
``tokens + reserved + cost`` stays within the limit — inside one transaction: SQLite's
``BEGIN IMMEDIATE`` holds the database's write lock across processes, and PostgreSQL locks
each account's row, re-checking the condition against the latest committed row. If one
account has no room, the ones already reserved in the transaction are given back before it
commits, so a call holds all of its accounts or none.

Every transaction touches reservation rows first, then usage rows in (day, account)
order, so two of them never wait on each other in a cycle.

The logic is a generator of ``(sql, arguments)`` that receives each statement's rows;
``run_sqlite`` drives it on a ``sqlite3`` connection inside the writer's transaction,
``run_postgres`` on an asyncpg connection inside ``PostgresStore.tx``.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bot.stores.sql import numbered

if TYPE_CHECKING:
    import sqlite3

__all__ = ["EXPIRY_INDEX", "Account", "Plan", "reserve", "run_postgres", "run_sqlite", "settle"]

Program = Generator[tuple[str, tuple[Any, ...]], list[Any], Any]
"""Statements out, each one's rows back in; the generator's return value is the result."""

EXPIRY_INDEX = (
    "CREATE INDEX IF NOT EXISTS token_reservations_expiry "
    "ON token_reservations (platform, workspace, user_id, expires_at)"
)
_HELD = "SELECT 1 FROM token_reservations WHERE id = ? LIMIT 1"
_RECLAIM = (
    "DELETE FROM token_reservations WHERE platform = ? AND workspace = ? AND user_id = ? "
    "AND expires_at <= ? RETURNING day, tokens"
)
_END = (
    "DELETE FROM token_reservations WHERE id = ? AND platform = ? AND workspace = ? "
    "AND user_id = ? RETURNING day, tokens"
)
_HOLD = (
    "INSERT INTO token_usage (day, platform, workspace, user_id, reserved) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (day, platform, workspace, user_id) "
    "DO UPDATE SET reserved = token_usage.reserved + excluded.reserved "
    "WHERE token_usage.tokens + token_usage.reserved + excluded.reserved <= ? RETURNING 1"
)
_ROW = (
    "INSERT INTO token_reservations (id, day, platform, workspace, user_id, tokens, expires_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_SETTLED = "SELECT tokens FROM token_usage WHERE day = ? AND platform = ? AND workspace = ? " \
    "AND user_id = ?"
_APPLY = (  # count ``tokens`` used and give back ``release`` reserved, in one upsert
    "INSERT INTO token_usage (day, platform, workspace, user_id, tokens) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (day, platform, workspace, user_id) "
    "DO UPDATE SET tokens = token_usage.tokens + excluded.tokens, "
    "reserved = CASE WHEN token_usage.reserved > ? THEN token_usage.reserved - ? ELSE 0 END"
)
_ADD_KIND = (
    "INSERT INTO token_usage_kinds (day, platform, workspace, user_id, kind, tokens) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (day, platform, workspace, user_id, kind) "
    "DO UPDATE SET tokens = token_usage_kinds.tokens + excluded.tokens"
)


class Account(Protocol):
    """Whose tokens (``bot.stores.usage.Account``)."""

    @property
    def platform(self) -> str: ...

    @property
    def workspace(self) -> str: ...

    @property
    def user(self) -> str: ...


Refused = tuple[Account, bool]
"""The account without room, and whether its settled count alone leaves none."""


def _order(a: Account) -> tuple[str, str, str]:
    return (a.platform, a.workspace, a.user)


@dataclass(frozen=True, slots=True)
class Plan:
    """One reservation: ``tokens`` on each account of ``limits`` for ``day``, id ``rid``,
    reclaiming what expired by ``now`` and itself expiring at ``expires_at``."""

    rid: str
    day: str
    limits: Mapping[Account, int]
    tokens: int
    now: float
    expires_at: float

    def too_big(self) -> Refused | None:
        """The refusal no transaction is needed for: the call alone is over a limit."""
        for account in sorted(self.limits, key=_order):
            if self.tokens > self.limits[account]:
                return account, True
        return None


def _where(day: str, a: Account) -> tuple[Any, ...]:
    return (day, a.platform, a.workspace, a.user)


def _apply(changes: dict[tuple[str, Account], tuple[int, int]]) -> Program:
    """Add used tokens and release reserved ones, per (day, account), in that order."""
    for (day, account), (used, release) in sorted(
            changes.items(), key=lambda item: (item[0][0], *_order(item[0][1]))):
        if used or release:
            yield _APPLY, (*_where(day, account), used, release, release)


def reserve(plan: Plan) -> Program:
    """The reservation transaction (module docstring); returns ``Refused | None``."""
    if (yield _HELD, (plan.rid,)):
        return None  # this reservation committed before (a retried transaction)
    accounts = sorted(plan.limits, key=_order)
    changes: dict[tuple[str, Account], tuple[int, int]] = {}
    for a in accounts:  # reclaim what calls that never settled left behind
        for day, tokens in (yield _RECLAIM, (a.platform, a.workspace, a.user, plan.now)):
            used, release = changes.get((str(day), a), (0, 0))
            changes[(str(day), a)] = (used, release + int(tokens))
    yield from _apply(changes)
    held: list[Account] = []
    for a in accounts:
        if (yield _HOLD, (*_where(plan.day, a), plan.tokens, plan.limits[a])):
            held.append(a)
            continue
        settled = yield _SETTLED, _where(plan.day, a)
        used = int(settled[0][0]) if settled else 0
        yield from _apply({(plan.day, h): (0, plan.tokens) for h in held})  # all or none
        return a, used + plan.tokens > plan.limits[a]
    for a in accounts:
        yield _ROW, (plan.rid, *_where(plan.day, a), plan.tokens, plan.expires_at)
    return None


def settle(rid: str, day: str, accounts: tuple[Account, ...], tokens: int,
           kind: str) -> Program:
    """End reservation ``rid`` where it still holds, count ``tokens`` on ``accounts``."""
    changes: dict[tuple[str, Account], tuple[int, int]] = {}
    for a in sorted(accounts, key=_order):
        for held_day, held in (yield _END, (rid, a.platform, a.workspace, a.user)):
            used, release = changes.get((str(held_day), a), (0, 0))
            changes[(str(held_day), a)] = (used, release + int(held))
    if tokens > 0:
        for a in accounts:
            used, release = changes.get((day, a), (0, 0))
            changes[(day, a)] = (used + tokens, release)
    yield from _apply(changes)
    if kind and tokens > 0:
        for a in sorted(accounts, key=_order):
            yield _ADD_KIND, (*_where(day, a), kind, tokens)


def run_sqlite(conn: sqlite3.Connection, program: Program) -> Any:
    """Run ``program`` on ``conn`` (inside the caller's transaction); its result."""
    try:
        sql, args = next(program)
        while True:
            sql, args = program.send(conn.execute(sql, args).fetchall())
    except StopIteration as done:
        return done.value


async def run_postgres(conn: Any, program: Program) -> Any:
    """Run ``program`` on an asyncpg connection (inside the caller's transaction)."""
    try:
        sql, args = next(program)
        while True:
            sql, args = program.send(list(await conn.fetch(numbered(sql), *args)))
    except StopIteration as done:
        return done.value
