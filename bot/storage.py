"""The storage a database URL asks for: ``sqlite:///path`` (the default) or
``postgresql://…`` (the ``postgres`` extra), with every storage role composed on its memory
store, not opened yet. The bot, ``migrate``, ``copy-db``, ``doctor`` and the container's
health check all open their database through here.
"""

from __future__ import annotations

from bot.errors import ConfigError
from bot.extras import POSTGRES, require
from bot.features.registry import ROLES
from bot.settings import Settings
from bot.stores import Storage
from memory.store import Store
from memory.stores.sqlite.store import SqliteStore

__all__ = ["make_storage", "storage_for_url"]


def make_storage(settings: Settings) -> Storage:
    """The storage ``DATABASE_URL`` asks for (SQLite by default), not opened yet."""
    db = settings.database
    storage = storage_for_url(
        db.database_url,
        synchronous=db.sqlite_synchronous,
        pool_size=db.database_pool_size,
    )
    storage.memory.summary_history = db.summary_history  # type: ignore[attr-defined]
    return storage


def storage_for_url(url: str, *, synchronous: str = "FULL", pool_size: int = 10) -> Storage:
    """The memory store for ``sqlite:///path`` or ``postgresql://…`` with every storage role
    composed on it, the features' too (``copy-db`` takes two)."""
    return Storage.on(_memory_store(url, synchronous=synchronous, pool_size=pool_size), ROLES)


def _memory_store(url: str, *, synchronous: str, pool_size: int) -> Store:
    if url.startswith("sqlite:///"):
        return SqliteStore(url[len("sqlite:///") :], synchronous=synchronous)  # type: ignore[arg-type]
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"{url!r}: use sqlite:///path/to/file.db or postgresql://user@host/db")
    require(POSTGRES, configured=True)
    from memory.stores.postgres.store import PostgresStore

    dsn, _, schema = url.partition("#")  # a "#schema" suffix selects a schema (tests, hosting)
    store: Store = PostgresStore(dsn, schema=schema or "public", max_size=pool_size)
    return store
