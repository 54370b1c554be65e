"""The summary history is written in the compaction's (and the edit's) own transaction: when
the history row cannot be written, the commit is rolled back whole on both backends — no
summary is installed that the history does not show. Also: the migration step adds the
table to a database of the previous version without touching its data."""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path

import pytest

from memory.errors import StoreError
from memory.models import ChannelKey, NewTurn
from memory.store import Store
from memory.stores.sqlite import schema as sqlite_schema
from memory.stores.sqlite import turn_search
from memory.stores.sqlite.store import SqliteStore

KEY = ChannelKey("discord", "g1", "c1")
DSN = os.environ.get("GISTBOT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def _seed(store: Store) -> None:
    for i in range(4):
        await store.record(NewTurn(KEY, f"m{i}", "user", "u", "U", f"t{i}", 1, float(i)))


async def _commit_fails_whole(store: Store) -> None:
    before = await store.state(KEY)
    with pytest.raises(StoreError):
        await store.commit_summary(KEY, expected_version=before.version, text="new",
                                   folded_through=2, facts=(), now=1.0)
    assert await store.state(KEY) == before  # no summary, no fold, no version bump
    with pytest.raises(StoreError):
        await store.edit_summary(KEY, expected_version=before.version, text="edit", now=1.0)
    assert await store.state(KEY) == before


async def test_sqlite_commit_rolls_back_without_its_history_row(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    async with SqliteStore(path) as store:
        await _seed(store)
    with sqlite3.connect(path) as conn:  # sabotage: the history can no longer be written
        conn.execute("DROP TABLE summary_history")
        conn.execute("CREATE TABLE summary_history (id INTEGER PRIMARY KEY, "
                     "channel_id INTEGER NOT NULL CHECK (channel_id < 0), version INTEGER, "
                     "text TEXT, first_seq INTEGER, last_seq INTEGER, committed_at REAL, "
                     "source TEXT, author TEXT)")
    async with SqliteStore(path) as store:
        await _commit_fails_whole(store)


async def test_sqlite_migration_adds_history_to_an_older_file(tmp_path: Path) -> None:
    """A file at the version before the history step (built by the earlier steps, wherever
    the step sits among later ones) keeps its data and gains the history."""
    step = next(i for i, m in enumerate(sqlite_schema.MIGRATIONS) if "summary_history" in m)
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    turn_search.register(conn)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for script in sqlite_schema.MIGRATIONS[:step]:
        for statement in sqlite_schema._statements(script):
            conn.execute(statement)
    conn.execute("INSERT INTO schema_version (version) VALUES (?)", (step,))
    conn.execute("INSERT INTO channels (platform, workspace, channel, summary, version) "
                 "VALUES ('discord', 'g1', 'c1', 'kept', 3)")
    conn.close()
    async with SqliteStore(path) as store:
        state = await store.state(KEY)
        assert (state.text, state.version) == ("kept", 3)
        await _seed(store)
        assert await store.commit_summary(KEY, expected_version=3, text="s",
                                          folded_through=2, facts=(), now=1.0)
        assert [v.text for v in await store.summary_history_of(KEY)] == ["s"]


async def test_postgres_commit_rolls_back_without_its_history_row() -> None:
    asyncpg = pytest.importorskip("asyncpg")
    from memory.stores.postgres.store import PostgresStore

    schema = f"gistbot_hist_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(DSN)
    try:
        async with PostgresStore(DSN, schema=schema, max_size=2) as store:
            await _seed(store)
            await admin.execute(f'ALTER TABLE "{schema}".summary_history ADD CONSTRAINT '
                                "never CHECK (channel_id < 0)")
            await _commit_fails_whole(store)
    finally:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()
