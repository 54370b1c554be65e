"""Per-channel settings and their change log, on either backend.

A setting row belongs to a *scope*: a channel (``ChannelKey``) or a whole server/workspace,
written as the same key with ``channel == SERVER`` (""). Values are strings; what a name
means is ``bot.channels.config``'s business. Every change is logged (``SettingChange``) and
bumps one global ``settings_version`` in the same transaction, so every replica notices a
change by polling one integer. The statements are shared by both backends (``sql``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.stores.schema import Ladder, Step
from bot.stores.sql import numbered
from memory.models import ChannelKey
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.writer import WriteTx

__all__ = [
    "LADDER", "SERVER", "PostgresSettings", "Setting", "SettingChange", "SettingsStore",
    "SqliteSettings", "server_scope",
]

SERVER = ""
"""The ``channel`` (or ``user``) of a server-wide scope or account."""


def server_scope(key: ChannelKey) -> ChannelKey:
    """The server/workspace scope that ``key``'s channel belongs to."""
    return ChannelKey(key.platform, key.workspace, SERVER)


@dataclass(frozen=True, slots=True)
class Setting:
    """One stored value: ``name`` = ``value`` in ``scope``, and who set it when."""

    scope: ChannelKey
    name: str
    value: str
    updated_by: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class SettingChange:
    """One logged change; ``value`` None means the setting was removed (unset)."""

    scope: ChannelKey
    name: str
    value: str | None
    actor: str
    at: float


class SettingsStore(Protocol):
    """Per-channel settings and their change log."""

    async def settings_version(self) -> int:
        """A number that grows with every settings change, in any process."""
        ...

    async def scope_settings(self, key: ChannelKey) -> list[Setting]:
        """The settings of ``key``'s channel and of its server scope."""
        ...

    async def put_setting(
        self, scope: ChannelKey, name: str, value: str | None, *, actor: str, now: float
    ) -> None:
        """Set (or with None remove) one setting, log the change, bump the version."""
        ...

    async def setting_changes(self, key: ChannelKey, *, limit: int = 20) -> list[SettingChange]:
        """The newest changes of ``key``'s channel and its server scope, newest first."""
        ...

    async def all_settings(self) -> tuple[list[Setting], list[SettingChange]]:
        """Every setting and every logged change, oldest change first (``copy-db``)."""
        ...

    async def import_settings(
        self, settings: Sequence[Setting], changes: Sequence[SettingChange]
    ) -> None:
        """Replace all settings and the change log with these (``copy-db``); one transaction."""
        ...


LADDER = Ladder("settings", (
    Step(
        sqlite="""
        CREATE TABLE IF NOT EXISTS channel_settings (
            platform TEXT NOT NULL, workspace TEXT NOT NULL, channel TEXT NOT NULL,
            name TEXT NOT NULL, value TEXT NOT NULL, updated_by TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (platform, workspace, channel, name)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS settings_changes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            platform TEXT NOT NULL, workspace TEXT NOT NULL, channel TEXT NOT NULL,
            name TEXT NOT NULL, value TEXT, actor TEXT NOT NULL, at REAL NOT NULL
        );
        CREATE INDEX IF NOT EXISTS settings_changes_scope
            ON settings_changes (platform, workspace, channel, id);
        CREATE TABLE IF NOT EXISTS settings_version (
            id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL
        );
        INSERT OR IGNORE INTO settings_version (id, version) VALUES (1, 0);
        """,
        postgres="""
        CREATE TABLE IF NOT EXISTS channel_settings (
            platform text NOT NULL, workspace text NOT NULL, channel text NOT NULL,
            name text NOT NULL, value text NOT NULL, updated_by text NOT NULL,
            updated_at double precision NOT NULL,
            PRIMARY KEY (platform, workspace, channel, name)
        );
        CREATE TABLE IF NOT EXISTS settings_changes (
            id bigserial PRIMARY KEY,
            platform text NOT NULL, workspace text NOT NULL, channel text NOT NULL,
            name text NOT NULL, value text, actor text NOT NULL, at double precision NOT NULL
        );
        CREATE INDEX IF NOT EXISTS settings_changes_scope
            ON settings_changes (platform, workspace, channel, id);
        CREATE TABLE IF NOT EXISTS settings_version (
            id integer PRIMARY KEY CHECK (id = 1), version bigint NOT NULL
        );
        INSERT INTO settings_version (id, version) VALUES (1, 0) ON CONFLICT DO NOTHING;
        """,
        marker=("settings_version", "version"),
    ),
))

_SETTING_COLS = "platform, workspace, channel, name, value, updated_by, updated_at"
_CHANGE_COLS = "platform, workspace, channel, name, value, actor, at"
VERSION = "SELECT version FROM settings_version WHERE id = 1"
SCOPE = (
    f"SELECT {_SETTING_COLS} FROM channel_settings WHERE platform = ? AND workspace = ? "
    "AND channel IN (?, ?) ORDER BY channel, name"
)
BUMP = "UPDATE settings_version SET version = version + 1 WHERE id = 1"
UNSET = (
    "DELETE FROM channel_settings WHERE platform = ? AND workspace = ? AND channel = ? "
    "AND name = ?"
)
PUT = (
    f"INSERT INTO channel_settings ({_SETTING_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (platform, workspace, channel, name) DO UPDATE SET "
    "value = excluded.value, updated_by = excluded.updated_by, "
    "updated_at = excluded.updated_at"
)
INSERT_SETTING = f"INSERT INTO channel_settings ({_SETTING_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
LOG = f"INSERT INTO settings_changes ({_CHANGE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
CHANGES = (
    f"SELECT {_CHANGE_COLS} FROM settings_changes WHERE platform = ? AND workspace = ? "
    "AND channel IN (?, ?) ORDER BY id DESC LIMIT ?"
)
ALL_SETTINGS = (
    f"SELECT {_SETTING_COLS} FROM channel_settings ORDER BY platform, workspace, channel, name"
)
ALL_CHANGES = f"SELECT {_CHANGE_COLS} FROM settings_changes ORDER BY id"


def _setting(r: Sequence[Any]) -> Setting:
    return Setting(ChannelKey(r[0], r[1], r[2]), r[3], r[4], r[5], float(r[6]))


def _change(r: Sequence[Any]) -> SettingChange:
    return SettingChange(ChannelKey(r[0], r[1], r[2]), r[3], r[4], r[5], float(r[6]))


def _setting_rows(settings: Sequence[Setting]) -> list[tuple[Any, ...]]:
    return [(s.scope.platform, s.scope.workspace, s.scope.channel, s.name, s.value,
             s.updated_by, s.updated_at) for s in settings]


def _change_rows(changes: Sequence[SettingChange]) -> list[tuple[Any, ...]]:
    return [(c.scope.platform, c.scope.workspace, c.scope.channel, c.name, c.value, c.actor,
             c.at) for c in changes]


def _scope_args(key: ChannelKey) -> tuple[str, str, str, str]:
    return key.platform, key.workspace, key.channel, SERVER


# ---------------------------------------------------------------------------- SQLite


def _version(conn: sqlite3.Connection) -> int:
    row = conn.execute(VERSION).fetchone()
    return int(row[0]) if row else 0


def _scope(conn: sqlite3.Connection, key: ChannelKey) -> list[Setting]:
    return [_setting(r) for r in conn.execute(SCOPE, _scope_args(key)).fetchall()]


def _put(tx: WriteTx, scope: ChannelKey, name: str, value: str | None, actor: str,
         now: float) -> None:
    where = (scope.platform, scope.workspace, scope.channel, name)
    if value is None:
        tx.conn.execute(UNSET, where)
    else:
        tx.conn.execute(PUT, (*where, value, actor, now))
    tx.conn.execute(LOG, (*where, value, actor, now))
    tx.conn.execute(BUMP)


def _changes(conn: sqlite3.Connection, key: ChannelKey, limit: int) -> list[SettingChange]:
    return [_change(r) for r in conn.execute(CHANGES, (*_scope_args(key), limit)).fetchall()]


def _everything(conn: sqlite3.Connection) -> tuple[list[Setting], list[SettingChange]]:
    return ([_setting(r) for r in conn.execute(ALL_SETTINGS).fetchall()],
            [_change(r) for r in conn.execute(ALL_CHANGES).fetchall()])


def _import(tx: WriteTx, settings: tuple[Setting, ...], changes: tuple[SettingChange, ...]
            ) -> None:
    tx.conn.execute("DELETE FROM channel_settings")
    tx.conn.execute("DELETE FROM settings_changes")
    tx.conn.executemany(INSERT_SETTING, _setting_rows(settings))
    tx.conn.executemany(LOG, _change_rows(changes))
    tx.conn.execute(BUMP)


class SqliteSettings:
    """``SettingsStore`` on a ``SqliteStore``'s writer and readers."""

    def __init__(self, db: SqliteStore) -> None:
        self.db = db

    async def settings_version(self) -> int:
        """See ``SettingsStore.settings_version``."""
        return await self.db.read(_version)

    async def scope_settings(self, key: ChannelKey) -> list[Setting]:
        """See ``SettingsStore.scope_settings``."""
        return await self.db.read(_scope, key)

    async def put_setting(
        self, scope: ChannelKey, name: str, value: str | None, *, actor: str, now: float
    ) -> None:
        """See ``SettingsStore.put_setting``."""
        await self.db.write(_put, scope, name, value, actor, now)

    async def setting_changes(self, key: ChannelKey, *, limit: int = 20) -> list[SettingChange]:
        """See ``SettingsStore.setting_changes``."""
        return await self.db.read(_changes, key, limit)

    async def all_settings(self) -> tuple[list[Setting], list[SettingChange]]:
        """See ``SettingsStore.all_settings``."""
        return await self.db.read(_everything)

    async def import_settings(
        self, settings: Sequence[Setting], changes: Sequence[SettingChange]
    ) -> None:
        """See ``SettingsStore.import_settings``."""
        await self.db.write(_import, tuple(settings), tuple(changes))


# ---------------------------------------------------------------------------- PostgreSQL


class PostgresSettings:
    """``SettingsStore`` on a ``PostgresStore``'s pool (the same statements, numbered)."""

    def __init__(self, db: Any) -> None:
        self.db = db

    async def settings_version(self) -> int:
        """See ``SettingsStore.settings_version``."""
        rows = await self.db.fetch(VERSION)
        return int(rows[0][0]) if rows else 0

    async def scope_settings(self, key: ChannelKey) -> list[Setting]:
        """See ``SettingsStore.scope_settings``."""
        return [_setting(r) for r in await self.db.fetch(numbered(SCOPE), *_scope_args(key))]

    async def put_setting(
        self, scope: ChannelKey, name: str, value: str | None, *, actor: str, now: float
    ) -> None:
        """See ``SettingsStore.put_setting``."""
        where = (scope.platform, scope.workspace, scope.channel, name)

        async def run(conn: Any) -> None:
            if value is None:
                await conn.execute(numbered(UNSET), *where)
            else:
                await conn.execute(numbered(PUT), *where, value, actor, now)
            await conn.execute(numbered(LOG), *where, value, actor, now)
            await conn.execute(BUMP)

        await self.db.tx(run)

    async def setting_changes(self, key: ChannelKey, *, limit: int = 20) -> list[SettingChange]:
        """See ``SettingsStore.setting_changes``."""
        rows = await self.db.fetch(numbered(CHANGES), *_scope_args(key), limit)
        return [_change(r) for r in rows]

    async def all_settings(self) -> tuple[list[Setting], list[SettingChange]]:
        """See ``SettingsStore.all_settings``."""

        async def run(conn: Any) -> tuple[list[Setting], list[SettingChange]]:
            return ([_setting(r) for r in await conn.fetch(ALL_SETTINGS)],
                    [_change(r) for r in await conn.fetch(ALL_CHANGES)])

        result: tuple[list[Setting], list[SettingChange]] = await self.db.tx(run, read=True)
        return result

    async def import_settings(
        self, settings: Sequence[Setting], changes: Sequence[SettingChange]
    ) -> None:
        """See ``SettingsStore.import_settings``."""

        async def run(conn: Any) -> None:
            await conn.execute("DELETE FROM channel_settings")
            await conn.execute("DELETE FROM settings_changes")
            await conn.executemany(numbered(INSERT_SETTING), _setting_rows(settings))
            await conn.executemany(numbered(LOG), _change_rows(changes))
            await conn.execute(BUMP)

        await self.db.tx(run)
