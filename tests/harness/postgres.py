"""The PostgreSQL the tests use (``GISTBOT_TEST_POSTGRES_URL``, default the machine's
127.0.0.1:5432 ``test`` database): whether it listens, and a fresh schema per test, so
tests running at the same time never see each other's tables."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

__all__ = ["PG", "fresh_schema", "reachable"]

PG = os.environ.get("GISTBOT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def reachable(dsn: str = PG) -> bool:
    """Whether something listens where ``dsn`` points (2 s to connect)."""
    parts = urlsplit(dsn)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), 2):
            return True
    except OSError:
        return False


@contextlib.asynccontextmanager
async def fresh_schema(prefix: str = "gistbot_test") -> AsyncIterator[str]:
    """A ``PG#schema`` URL of a new schema (the stores create it), dropped afterwards."""
    asyncpg = pytest.importorskip("asyncpg")
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        yield f"{PG}#{name}"
    finally:
        conn = await asyncpg.connect(PG)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        finally:
            await conn.close()
