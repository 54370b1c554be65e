"""One migration ladder per storage role, on the memory store's database.

The tables of channel settings, token usage, digests, owed replies, the outbox and backfill
marks are not memory: each role keeps its own steps (``Step``: SQLite and PostgreSQL DDL)
and its version in ``role_schema`` (one row per role), and ``migrate`` runs after the memory
store opened, through its writer (SQLite) or pool (PostgreSQL), one transaction per role.

Databases written before the roles had ladders hold these tables from the memory ladder.
A role without a row is *adopted*: its version is the number of leading steps whose marker
column exists, so nothing is created twice and nothing missing is skipped. A role version
higher than its ladder was written by a newer gistbot and is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.stores.common import schema_too_new
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.writer import WriteTx

__all__ = ["Ladder", "Step", "migrate_postgres", "migrate_sqlite"]


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a role's ladder: its DDL per backend, and the column (``table``,
    ``column``) whose presence shows the step ran (adoption of older databases)."""

    sqlite: str
    postgres: str
    marker: tuple[str, str]


@dataclass(frozen=True, slots=True)
class Ladder:
    """A role's steps, in order; ``steps[i]`` takes the role from version ``i`` to ``i + 1``."""

    role: str
    steps: tuple[Step, ...]


_SQLITE_VERSIONS = (
    "CREATE TABLE IF NOT EXISTS role_schema (role TEXT PRIMARY KEY, version INTEGER NOT NULL)"
)
_PG_VERSIONS = (
    "CREATE TABLE IF NOT EXISTS role_schema (role text PRIMARY KEY, version integer NOT NULL)"
)


def _sqlite_ladder(tx: WriteTx, ladder: Ladder) -> None:
    conn = tx.conn
    row = conn.execute("SELECT version FROM role_schema WHERE role = ?", (ladder.role,)).fetchone()
    if row is None:
        current = _adopted(ladder, lambda t, c: conn.execute(
            "SELECT 1 FROM pragma_table_info(?) WHERE name = ?", (t, c)).fetchone() is not None)
    else:
        current = int(row[0])
    if current > len(ladder.steps):
        raise schema_too_new(current, len(ladder.steps))
    for step in ladder.steps[current:]:
        for statement in step.sqlite.split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute(
        "INSERT INTO role_schema (role, version) VALUES (?, ?) "
        "ON CONFLICT (role) DO UPDATE SET version = excluded.version",
        (ladder.role, len(ladder.steps)),
    )


def _adopted(ladder: Ladder, has: Any) -> int:
    """The version of a role without a ``role_schema`` row: its leading steps that ran."""
    n = 0
    for step in ladder.steps:
        if not has(*step.marker):
            break
        n += 1
    return n


def _sqlite_all(tx: WriteTx, ladders: Sequence[Ladder]) -> None:
    tx.conn.execute(_SQLITE_VERSIONS)
    for ladder in ladders:
        _sqlite_ladder(tx, ladder)


async def migrate_sqlite(store: SqliteStore, ladders: Sequence[Ladder]) -> None:
    """Bring every role of ``ladders`` up to date on an open ``SqliteStore``; one write."""
    await store.write(_sqlite_all, tuple(ladders))


async def migrate_postgres(store: Any, ladders: Sequence[Ladder]) -> None:
    """Bring every role of ``ladders`` up to date on an open ``PostgresStore``, in one
    transaction under an advisory lock, so replicas starting together migrate once."""

    async def run(conn: Any) -> None:
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('gistbot:roles:' || "
            "current_schema(), 0))"
        )
        await conn.execute(_PG_VERSIONS)
        for ladder in ladders:
            found = await conn.fetchval("SELECT version FROM role_schema WHERE role = $1",
                                        ladder.role)
            if found is None:
                cols = {(r[0], r[1]) for r in await conn.fetch(
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema()")}
                current = _adopted(ladder, lambda t, c, cols=cols: (t, c) in cols)
            else:
                current = int(found)
            if current > len(ladder.steps):
                raise schema_too_new(current, len(ladder.steps))
            for step in ladder.steps[current:]:
                await conn.execute(step.postgres)
            await conn.execute(
                "INSERT INTO role_schema (role, version) VALUES ($1, $2) "
                "ON CONFLICT (role) DO UPDATE SET version = excluded.version",
                ladder.role, len(ladder.steps),
            )

    await store.tx(run)
