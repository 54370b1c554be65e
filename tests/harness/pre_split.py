"""Databases as gistbot wrote them before the storage roles had their own ladders.

Until then one ladder per backend created every table; the roles' steps (``bot.stores``)
hold the same DDL the memory ladder ran at these steps, which are empty in it now. A test
builds an old database by running the memory steps and, after each, the role steps it
used to run, without the ``role_schema`` rows a new gistbot writes.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from bot.stores import backfill, digests, outbox, owed, settings, usage
from bot.stores.schema import Step
from memory.stores.postgres import schema as pg_schema
from memory.stores.sqlite import schema as sqlite_schema

__all__ = ["POSTGRES_STEPS", "SQLITE_STEPS", "postgres_file", "sqlite_file"]

SQLITE_STEPS: dict[int, tuple[Step, ...]] = {  # memory step (1-based) -> role steps it ran
    6: (backfill.LADDER.steps[0],),
    7: (owed.LADDER.steps[0],),
    9: (settings.LADDER.steps[0], usage.LADDER.steps[0]),
    10: (digests.LADDER.steps[0],),
    13: (owed.LADDER.steps[1], outbox.LADDER.steps[0]),
    14: (usage.LADDER.steps[1],),
}
POSTGRES_STEPS: dict[int, tuple[Step, ...]] = {
    5: (backfill.LADDER.steps[0],),
    6: (owed.LADDER.steps[0],),
    8: (settings.LADDER.steps[0], usage.LADDER.steps[0]),
    9: (digests.LADDER.steps[0],),
    10: (owed.LADDER.steps[1], outbox.LADDER.steps[0]),
    11: (usage.LADDER.steps[1],),
}


def sqlite_file(conn: sqlite3.Connection, version: int) -> None:
    """Schema ``version`` of the single ladder on an empty ``conn`` (autocommit; the
    ``gistbot_terms`` function registered)."""
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (?)", (version,))
    for n, script in enumerate(sqlite_schema.MIGRATIONS[:version], start=1):
        for statement in sqlite_schema._statements(script):
            conn.execute(statement)
        for step in SQLITE_STEPS.get(n, ()):
            for statement in step.sqlite.split(";"):
                if statement.strip():
                    conn.execute(statement)


async def postgres_file(admin: Any, schema: str, version: int) -> None:
    """Schema ``version`` of the single ladder in the new PostgreSQL ``schema``."""
    await admin.execute(f'CREATE SCHEMA "{schema}"; SET search_path = "{schema}"')
    for n, script in enumerate(pg_schema.MIGRATIONS[:version], start=1):
        if script:
            await admin.execute(script)
        for step in POSTGRES_STEPS.get(n, ()):
            await admin.execute(step.postgres)
    await admin.execute("CREATE TABLE schema_version (version integer NOT NULL);"
                        f"INSERT INTO schema_version VALUES ({version})")
