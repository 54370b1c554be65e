"""The storage roles that are not memory (``bot.stores``) on both backends: the roles
contract on a SQLite file and on a fresh PostgreSQL schema, and their migration ladders
(new databases, databases the memory ladder wrote before the roles had their own, and a
role version from a newer gistbot)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import storage_for_url
from bot.features.registry import ROLES
from bot.stores import LADDERS, Storage
from bot.stores.usage import UsageKey
from memory.errors import SchemaTooNewError
from memory.models import ChannelKey
from memory.stores.sqlite.schema import SCHEMA_VERSION
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.turn_search import register
from tests.harness.postgres import PG, fresh_schema, reachable
from tests.harness.pre_split import postgres_file, sqlite_file
from tests.harness.roles_contract import MakeStorage, RolesContract

EVERY_LADDER = (*LADDERS, *(r.ladder for r in ROLES))  # the features' roles too
KEY = ChannelKey("discord", "g1", "c1")
SERVER = UsageKey("discord", "g1")


class TestSqliteRoles(RolesContract):
    """The roles contract on a fresh SQLite file per test."""

    @pytest.fixture
    async def make_storage(self, tmp_path: Path) -> AsyncIterator[MakeStorage]:
        opened: list[Storage] = []

        async def make() -> Storage:
            storage = storage_for_url(f"sqlite:///{tmp_path / 'gistbot.db'}")
            await storage.open()
            opened.append(storage)
            return storage

        yield make
        for storage in opened:
            await storage.close()


@pytest.mark.skipif(not reachable(), reason="no PostgreSQL listening")
class TestPostgresRoles(RolesContract):
    """The roles contract, each test on its own PostgreSQL schema."""

    @pytest.fixture
    async def make_storage(self) -> AsyncIterator[MakeStorage]:
        pytest.importorskip("asyncpg")
        opened: list[Storage] = []
        async with fresh_schema() as url:

            async def make() -> Storage:
                storage = storage_for_url(url, pool_size=4)
                await storage.open()
                opened.append(storage)
                return storage

            yield make
            for storage in opened:
                await storage.close()


# ---------------------------------------------------------------------------- ladders: SQLite


def _old_sqlite(path: Path, version: int) -> None:
    with sqlite3.connect(path, isolation_level=None) as conn:
        register(conn)
        sqlite_file(conn, version)


async def test_a_new_sqlite_file_gets_every_role_at_its_latest_version(tmp_path: Path) -> None:
    async with storage_for_url(f"sqlite:///{tmp_path / 'new.db'}"):
        pass
    with sqlite3.connect(tmp_path / "new.db") as conn:
        assert dict(conn.execute("SELECT role, version FROM role_schema")) == {
            ladder.role: len(ladder.steps) for ladder in EVERY_LADDER}
        memory_version = conn.execute("SELECT version FROM schema_version").fetchone()[0]
    assert memory_version == SCHEMA_VERSION


async def test_a_file_the_single_ladder_finished_is_adopted_with_its_rows(
    tmp_path: Path,
) -> None:
    """Version 15 (every table, no ``role_schema``): nothing is created again (the owed
    step 2's ALTER would fail on its existing column) and every row is kept."""
    path = tmp_path / "v15.db"
    _old_sqlite(path, 15)
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("INSERT INTO token_usage (day, platform, workspace, user_id, tokens) "
                     "VALUES ('2026-01-01', 'discord', 'g1', '', 9833)")
        conn.execute("INSERT INTO channel_settings VALUES ('discord', 'g1', 'c1', 'model', "
                     "'big', 'alice', 1.0)")
        conn.execute("INSERT INTO outbox (id, platform, workspace, channel, created_at, "
                     "message_id) VALUES ('reply:1', 'discord', 'g1', 'c1', 1e12, '42')")
    async with storage_for_url(f"sqlite:///{path}") as storage:
        assert await storage.usage.tokens_used("2026-01-01", [SERVER]) == {SERVER: 9833}
        [s] = await storage.settings.scope_settings(KEY)
        assert (s.name, s.value) == ("model", "big")
        assert await storage.outbox.outbox_intent(KEY, "reply:1") == "42"


async def test_a_version_8_file_gains_the_later_role_steps(tmp_path: Path) -> None:
    """Version 8 had backfill marks and owed replies (without placeholders), not settings,
    usage, digests or the outbox: the first two are adopted, the rest created."""
    path = tmp_path / "v8.db"
    _old_sqlite(path, 8)
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("INSERT INTO owed_replies (platform, workspace, channel, message_id, seq, "
                     "sent_at) VALUES ('discord', 'g1', 'c1', 'm1', 1, 5.0)")
        conn.execute("INSERT INTO backfill_marks VALUES ('discord', 'g1', 'c1', '100', 1.0)")
        assert "placeholder" not in {r[1] for r in conn.execute(
            "PRAGMA table_info(owed_replies)")}
    async with storage_for_url(f"sqlite:///{path}") as storage:
        assert await storage.backfill.backfill_mark(KEY) == "100"
        [debt] = await storage.owed.claim_due("discord", "p1", 30, since=0.0)
        assert (debt.message_id, debt.placeholder) == ("m1", "")
        assert await storage.owed.owed_placeholder(KEY, "m1", "p1", "1700.1")
        await storage.usage.add_tokens("2026-01-01", [SERVER], 5, kind="reply")
        assert await storage.usage.tokens_by_kind("2026-01-01", [SERVER]) == {
            SERVER: {"reply": 5}}
        await storage.settings.put_setting(KEY, "model", "big", actor="a", now=1.0)
        assert await storage.digests.digest_schedules() == []
        assert await storage.outbox.outbox_intent(KEY, "reply:2") is None


async def test_a_version_12_files_token_counts_survive_and_are_kept_per_kind_after(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v12.db"
    _old_sqlite(path, 12)
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("INSERT INTO token_usage (day, platform, workspace, user_id, tokens, "
                     "notified) VALUES ('2026-01-01', 'discord', 'g1', '', 9833, 0)")
    async with storage_for_url(f"sqlite:///{path}") as storage:
        usage = storage.usage
        assert await usage.tokens_used("2026-01-01", [SERVER]) == {SERVER: 9833}
        assert await usage.tokens_by_kind("2026-01-01", [SERVER]) == {SERVER: {}}
        await usage.add_tokens("2026-01-01", [SERVER], 100, kind="catchup")
        assert await usage.tokens_used("2026-01-01", [SERVER]) == {SERVER: 9933}
        assert await usage.tokens_by_kind("2026-01-01", [SERVER]) == {SERVER: {"catchup": 100}}


async def test_a_file_opened_by_the_memory_store_alone_still_gets_the_roles(
    tmp_path: Path,
) -> None:
    """The memory ladder no longer creates the roles' tables, so adoption must not mistake
    a memory-only file at the latest version for one that has them."""
    path = tmp_path / "memory-only.db"
    async with SqliteStore(path):
        pass
    async with storage_for_url(f"sqlite:///{path}") as storage:
        await storage.settings.put_setting(KEY, "model", "big", actor="a", now=1.0)
        assert await storage.settings.settings_version() == 1


async def test_a_role_version_from_a_newer_gistbot_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    async with storage_for_url(f"sqlite:///{path}"):
        pass
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("UPDATE role_schema SET version = 99 WHERE role = 'owed'")
    with pytest.raises(SchemaTooNewError):
        await storage_for_url(f"sqlite:///{path}").open()


# ---------------------------------------------------------------------------- ladders: PostgreSQL


@pytest.fixture
async def pg_admin() -> AsyncIterator[Any]:
    if not reachable():
        pytest.skip("no PostgreSQL listening")
    asyncpg = pytest.importorskip("asyncpg")
    conn = await asyncpg.connect(PG)
    yield conn
    await conn.close()


@pytest.mark.parametrize("version", [8, 9, 12])
async def test_an_old_postgres_schema_is_adopted_and_completed(pg_admin: Any,
                                                               version: int) -> None:
    """Version 8 had settings and usage without kinds; 9 digests too; 12 every table."""
    async with fresh_schema() as url:
        schema = url.rpartition("#")[2]
        await postgres_file(pg_admin, schema, version)
        await pg_admin.execute(
            "INSERT INTO token_usage (day, platform, workspace, user_id, tokens) "
            "VALUES ('2026-01-01', 'discord', 'g1', '', 9833);"
            "INSERT INTO owed_replies (platform, workspace, channel, message_id, seq, "
            "sent_at) VALUES ('discord', 'g1', 'c1', 'm1', 1, 5.0)")
        storage = storage_for_url(url, pool_size=2)
        await storage.open()
        try:
            usage = storage.usage
            assert await usage.tokens_used("2026-01-01", [SERVER]) == {SERVER: 9833}
            await usage.add_tokens("2026-01-01", [SERVER], 100, kind="digest")
            assert await usage.tokens_by_kind("2026-01-01", [SERVER]) == {
                SERVER: {"digest": 100}}
            [debt] = await storage.owed.claim_due("discord", "p1", 30, since=0.0)
            assert await storage.owed.owed_placeholder(KEY, debt.message_id, "p1", "9")
            assert await storage.outbox.outbox_intent(KEY, "reply:1") is None
            assert await storage.digests.digest_schedules() == []
        finally:
            await storage.close()
        rows = await pg_admin.fetch(f'SELECT role, version FROM "{schema}".role_schema')
        assert dict(rows) == {ladder.role: len(ladder.steps) for ladder in EVERY_LADDER}
