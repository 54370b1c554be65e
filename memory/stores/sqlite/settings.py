"""``SqliteStore``'s settings role (``memory.store.SettingsStore``): per-channel settings,
their change log, the polled version and daily token usage. A mixin, so the store class
only names it; the SQL lives here. Writes go through the group-commit writer like every
other write, so a change and its log entry and version bump commit together."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from memory.channel_settings import SERVER, Setting, SettingChange, UsageKey
from memory.models import ChannelKey
from memory.stores.sqlite.writer import WriteTx

__all__ = ["SqliteSettings"]

P = ParamSpec("P")
T = TypeVar("T")

_SETTING_COLS = "platform, workspace, channel, name, value, updated_by, updated_at"
_CHANGE_COLS = "platform, workspace, channel, name, value, actor, at"


def _setting(row: Sequence[Any]) -> Setting:
    return Setting(ChannelKey(row[0], row[1], row[2]), row[3], row[4], row[5], float(row[6]))


def _change(row: Sequence[Any]) -> SettingChange:
    return SettingChange(ChannelKey(row[0], row[1], row[2]), row[3], row[4], row[5], float(row[6]))


def _version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT version FROM settings_version WHERE id = 1").fetchone()
    return int(row[0]) if row else 0


def _scope(conn: sqlite3.Connection, key: ChannelKey) -> list[Setting]:
    rows = conn.execute(
        f"SELECT {_SETTING_COLS} FROM channel_settings WHERE platform = ? AND workspace = ? "
        "AND channel IN (?, ?) ORDER BY channel, name",
        (key.platform, key.workspace, key.channel, SERVER),
    ).fetchall()
    return [_setting(r) for r in rows]


def _bump(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE settings_version SET version = version + 1 WHERE id = 1")


def _put(tx: WriteTx, scope: ChannelKey, name: str, value: str | None, actor: str,
         now: float) -> None:
    where = (scope.platform, scope.workspace, scope.channel, name)
    if value is None:
        tx.conn.execute(
            "DELETE FROM channel_settings WHERE platform = ? AND workspace = ? AND channel = ? "
            "AND name = ?", where,
        )
    else:
        tx.conn.execute(
            f"INSERT INTO channel_settings ({_SETTING_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (platform, workspace, channel, name) DO UPDATE SET "
            "value = excluded.value, updated_by = excluded.updated_by, "
            "updated_at = excluded.updated_at",
            (*where, value, actor, now),
        )
    tx.conn.execute(
        f"INSERT INTO settings_changes ({_CHANGE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*where, value, actor, now),
    )
    _bump(tx.conn)


def _changes(conn: sqlite3.Connection, key: ChannelKey, limit: int) -> list[SettingChange]:
    rows = conn.execute(
        f"SELECT {_CHANGE_COLS} FROM settings_changes WHERE platform = ? AND workspace = ? "
        "AND channel IN (?, ?) ORDER BY id DESC LIMIT ?",
        (key.platform, key.workspace, key.channel, SERVER, limit),
    ).fetchall()
    return [_change(r) for r in rows]


def _everything(conn: sqlite3.Connection) -> tuple[list[Setting], list[SettingChange]]:
    settings = conn.execute(
        f"SELECT {_SETTING_COLS} FROM channel_settings ORDER BY platform, workspace, channel, name"
    ).fetchall()
    changes = conn.execute(f"SELECT {_CHANGE_COLS} FROM settings_changes ORDER BY id").fetchall()
    return [_setting(r) for r in settings], [_change(r) for r in changes]


def _import(tx: WriteTx, settings: tuple[Setting, ...], changes: tuple[SettingChange, ...]
            ) -> None:
    tx.conn.execute("DELETE FROM channel_settings")
    tx.conn.execute("DELETE FROM settings_changes")
    tx.conn.executemany(
        f"INSERT INTO channel_settings ({_SETTING_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(s.scope.platform, s.scope.workspace, s.scope.channel, s.name, s.value,
          s.updated_by, s.updated_at) for s in settings],
    )
    tx.conn.executemany(
        f"INSERT INTO settings_changes ({_CHANGE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(c.scope.platform, c.scope.workspace, c.scope.channel, c.name, c.value, c.actor, c.at)
         for c in changes],
    )
    _bump(tx.conn)


def _add_tokens(tx: WriteTx, day: str, accounts: tuple[UsageKey, ...], tokens: int,
                kind: str) -> None:
    rows = [(day, a.platform, a.workspace, a.user, tokens) for a in accounts]
    tx.conn.executemany(
        "INSERT INTO token_usage (day, platform, workspace, user_id, tokens) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (day, platform, workspace, user_id) "
        "DO UPDATE SET tokens = tokens + excluded.tokens",
        rows,
    )
    if kind:
        tx.conn.executemany(
            "INSERT INTO token_usage_kinds (day, platform, workspace, user_id, kind, tokens) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (day, platform, workspace, user_id, kind) "
            "DO UPDATE SET tokens = tokens + excluded.tokens",
            [(*r[:4], kind, tokens) for r in rows],
        )


def _by_kind(conn: sqlite3.Connection, day: str, accounts: tuple[UsageKey, ...]
             ) -> dict[UsageKey, dict[str, int]]:
    out: dict[UsageKey, dict[str, int]] = {}
    for a in accounts:
        rows = conn.execute(
            "SELECT kind, tokens FROM token_usage_kinds WHERE day = ? AND platform = ? "
            "AND workspace = ? AND user_id = ? ORDER BY kind",
            (day, a.platform, a.workspace, a.user),
        ).fetchall()
        out[a] = {str(r[0]): int(r[1]) for r in rows}
    return out


def _used(conn: sqlite3.Connection, day: str, accounts: tuple[UsageKey, ...]
          ) -> dict[UsageKey, int]:
    out = {}
    for a in accounts:
        row = conn.execute(
            "SELECT tokens FROM token_usage WHERE day = ? AND platform = ? AND workspace = ? "
            "AND user_id = ?", (day, a.platform, a.workspace, a.user),
        ).fetchone()
        out[a] = int(row[0]) if row else 0
    return out


def _claim_notice(tx: WriteTx, day: str, a: UsageKey) -> bool:
    args = (day, a.platform, a.workspace, a.user)
    tx.conn.execute(
        "INSERT OR IGNORE INTO token_usage (day, platform, workspace, user_id) "
        "VALUES (?, ?, ?, ?)", args,
    )
    cur = tx.conn.execute(
        "UPDATE token_usage SET notified = 1 WHERE day = ? AND platform = ? AND workspace = ? "
        "AND user_id = ? AND notified = 0", args,
    )
    return cur.rowcount == 1


class SqliteSettings:
    """The settings role, mixed into ``SqliteStore`` (which supplies ``_read``/``_write``)."""

    if TYPE_CHECKING:
        async def _write(self, fn: Callable[Concatenate[WriteTx, P], T], *args: P.args,
                         **kwargs: P.kwargs) -> T: ...

        async def _read(self, fn: Callable[Concatenate[sqlite3.Connection, P], T],
                        *args: P.args, **kwargs: P.kwargs) -> T: ...

    async def settings_version(self) -> int:
        """See ``SettingsStore.settings_version``."""
        return await self._read(_version)

    async def scope_settings(self, key: ChannelKey) -> list[Setting]:
        """See ``SettingsStore.scope_settings``."""
        return await self._read(_scope, key)

    async def put_setting(
        self, scope: ChannelKey, name: str, value: str | None, *, actor: str, now: float
    ) -> None:
        """See ``SettingsStore.put_setting``."""
        await self._write(_put, scope, name, value, actor, now)

    async def setting_changes(self, key: ChannelKey, *, limit: int = 20) -> list[SettingChange]:
        """See ``SettingsStore.setting_changes``."""
        return await self._read(_changes, key, limit)

    async def all_settings(self) -> tuple[list[Setting], list[SettingChange]]:
        """See ``SettingsStore.all_settings``."""
        return await self._read(_everything)

    async def import_settings(
        self, settings: Sequence[Setting], changes: Sequence[SettingChange]
    ) -> None:
        """See ``SettingsStore.import_settings``."""
        await self._write(_import, tuple(settings), tuple(changes))

    async def add_tokens(self, day: str, accounts: Sequence[UsageKey], tokens: int, *,
                         kind: str = "") -> None:
        """See ``SettingsStore.add_tokens``."""
        if tokens > 0 and accounts:
            await self._write(_add_tokens, day, tuple(accounts), tokens, kind)

    async def tokens_used(self, day: str, accounts: Sequence[UsageKey]) -> dict[UsageKey, int]:
        """See ``SettingsStore.tokens_used``."""
        return await self._read(_used, day, tuple(accounts))

    async def tokens_by_kind(self, day: str, accounts: Sequence[UsageKey]
                             ) -> dict[UsageKey, dict[str, int]]:
        """See ``SettingsStore.tokens_by_kind``."""
        return await self._read(_by_kind, day, tuple(accounts))

    async def claim_quota_notice(self, day: str, account: UsageKey) -> bool:
        """See ``SettingsStore.claim_quota_notice``."""
        return await self._write(_claim_notice, day, account)
