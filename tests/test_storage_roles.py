"""The storage roles that are not memory (``bot.stores``) on both backends: the roles
contract on a SQLite file and on a fresh PostgreSQL schema, and their migration ladders
(new databases, databases the memory ladder wrote before the roles had their own, and a
role version from a newer gistbot)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import storage_for_url
from bot.stores import LADDERS, Storage
from bot.stores.usage import UsageKey
from memory.errors import SchemaTooNewError
from tests.harness.postgres import fresh_schema, reachable
from tests.harness.roles_contract import MakeStorage, RolesContract


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
