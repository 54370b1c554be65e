"""``PostgresStore``'s settings role (``memory.store.SettingsStore``): per-channel settings,
their change log, the polled version and daily token usage. A mixin, so the store class
only names it. A change, its log entry and the version bump are one transaction; token
counts are atomic increments (``INSERT … ON CONFLICT DO UPDATE``), so replicas sharing the
database count together."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from memory.channel_settings import SERVER, Setting, SettingChange, UsageKey
from memory.models import ChannelKey

__all__ = ["PostgresSettings"]

T = TypeVar("T")
Conn = Any

_SETTING_COLS = "platform, workspace, channel, name, value, updated_by, updated_at"
_CHANGE_COLS = "platform, workspace, channel, name, value, actor, at"


def _setting(r: Any) -> Setting:
    return Setting(ChannelKey(r[0], r[1], r[2]), r[3], r[4], r[5], float(r[6]))


def _change(r: Any) -> SettingChange:
    return SettingChange(ChannelKey(r[0], r[1], r[2]), r[3], r[4], r[5], float(r[6]))


class PostgresSettings:
    """The settings role, mixed into ``PostgresStore`` (which supplies ``_tx``/``_fetch``)."""

    if TYPE_CHECKING:
        async def _tx(self, fn: Callable[[Conn], Awaitable[T]], *, read: bool = False) -> T: ...

        async def _fetch(self, sql: str, *args: Any) -> list[Any]: ...

    async def settings_version(self) -> int:
        """See ``SettingsStore.settings_version``."""
        rows = await self._fetch("SELECT version FROM settings_version WHERE id = 1")
        return int(rows[0][0]) if rows else 0

    async def scope_settings(self, key: ChannelKey) -> list[Setting]:
        """See ``SettingsStore.scope_settings``."""
        rows = await self._fetch(
            f"SELECT {_SETTING_COLS} FROM channel_settings WHERE platform = $1 AND "
            "workspace = $2 AND channel IN ($3, $4) ORDER BY channel, name",
            key.platform, key.workspace, key.channel, SERVER,
        )
        return [_setting(r) for r in rows]

    async def put_setting(
        self, scope: ChannelKey, name: str, value: str | None, *, actor: str, now: float
    ) -> None:
        """See ``SettingsStore.put_setting``."""
        where = (scope.platform, scope.workspace, scope.channel, name)

        async def run(conn: Conn) -> None:
            if value is None:
                await conn.execute(
                    "DELETE FROM channel_settings WHERE platform = $1 AND workspace = $2 "
                    "AND channel = $3 AND name = $4", *where,
                )
            else:
                await conn.execute(
                    f"INSERT INTO channel_settings ({_SETTING_COLS}) VALUES "
                    "($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (platform, workspace, channel, "
                    "name) DO UPDATE SET value = excluded.value, updated_by = "
                    "excluded.updated_by, updated_at = excluded.updated_at",
                    *where, value, actor, now,
                )
            await conn.execute(
                f"INSERT INTO settings_changes ({_CHANGE_COLS}) VALUES "
                "($1, $2, $3, $4, $5, $6, $7)", *where, value, actor, now,
            )
            await conn.execute("UPDATE settings_version SET version = version + 1 WHERE id = 1")

        await self._tx(run)

    async def setting_changes(self, key: ChannelKey, *, limit: int = 20) -> list[SettingChange]:
        """See ``SettingsStore.setting_changes``."""
        rows = await self._fetch(
            f"SELECT {_CHANGE_COLS} FROM settings_changes WHERE platform = $1 AND "
            "workspace = $2 AND channel IN ($3, $4) ORDER BY id DESC LIMIT $5",
            key.platform, key.workspace, key.channel, SERVER, limit,
        )
        return [_change(r) for r in rows]

    async def all_settings(self) -> tuple[list[Setting], list[SettingChange]]:
        """See ``SettingsStore.all_settings``."""

        async def run(conn: Conn) -> tuple[list[Setting], list[SettingChange]]:
            settings = await conn.fetch(
                f"SELECT {_SETTING_COLS} FROM channel_settings "
                "ORDER BY platform, workspace, channel, name"
            )
            changes = await conn.fetch(f"SELECT {_CHANGE_COLS} FROM settings_changes ORDER BY id")
            return [_setting(r) for r in settings], [_change(r) for r in changes]

        return await self._tx(run, read=True)

    async def import_settings(
        self, settings: Sequence[Setting], changes: Sequence[SettingChange]
    ) -> None:
        """See ``SettingsStore.import_settings``."""

        async def run(conn: Conn) -> None:
            await conn.execute("DELETE FROM channel_settings")
            await conn.execute("DELETE FROM settings_changes")
            await conn.executemany(
                f"INSERT INTO channel_settings ({_SETTING_COLS}) VALUES "
                "($1, $2, $3, $4, $5, $6, $7)",
                [(s.scope.platform, s.scope.workspace, s.scope.channel, s.name, s.value,
                  s.updated_by, s.updated_at) for s in settings],
            )
            await conn.executemany(
                f"INSERT INTO settings_changes ({_CHANGE_COLS}) VALUES "
                "($1, $2, $3, $4, $5, $6, $7)",
                [(c.scope.platform, c.scope.workspace, c.scope.channel, c.name, c.value,
                  c.actor, c.at) for c in changes],
            )
            await conn.execute("UPDATE settings_version SET version = version + 1 WHERE id = 1")

        await self._tx(run)

    async def add_tokens(self, day: str, accounts: Sequence[UsageKey], tokens: int, *,
                         kind: str = "") -> None:
        """See ``SettingsStore.add_tokens``."""
        if tokens <= 0 or not accounts:
            return
        rows = [(day, a.platform, a.workspace, a.user, tokens) for a in accounts]

        async def run(conn: Conn) -> None:
            await conn.executemany(
                "INSERT INTO token_usage (day, platform, workspace, user_id, tokens) "
                "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (day, platform, workspace, user_id) "
                "DO UPDATE SET tokens = token_usage.tokens + excluded.tokens",
                rows,
            )
            if kind:
                await conn.executemany(
                    "INSERT INTO token_usage_kinds (day, platform, workspace, user_id, kind, "
                    "tokens) VALUES ($1, $2, $3, $4, $5, $6) "
                    "ON CONFLICT (day, platform, workspace, user_id, kind) "
                    "DO UPDATE SET tokens = token_usage_kinds.tokens + excluded.tokens",
                    [(*r[:4], kind, tokens) for r in rows],
                )

        await self._tx(run)

    async def tokens_by_kind(self, day: str, accounts: Sequence[UsageKey]
                             ) -> dict[UsageKey, dict[str, int]]:
        """See ``SettingsStore.tokens_by_kind``."""
        out: dict[UsageKey, dict[str, int]] = {a: {} for a in accounts}
        if not accounts:
            return out
        rows = await self._fetch(
            "SELECT platform, workspace, user_id, kind, tokens FROM token_usage_kinds "
            "WHERE day = $1 AND (platform, workspace, user_id) IN "
            "(SELECT * FROM unnest($2::text[], $3::text[], $4::text[])) ORDER BY kind",
            day, [a.platform for a in accounts], [a.workspace for a in accounts],
            [a.user for a in accounts],
        )
        for r in rows:
            out[UsageKey(r[0], r[1], r[2])][str(r[3])] = int(r[4])
        return out

    async def tokens_used(self, day: str, accounts: Sequence[UsageKey]) -> dict[UsageKey, int]:
        """See ``SettingsStore.tokens_used``."""
        out = {a: 0 for a in accounts}
        if not accounts:
            return out
        rows = await self._fetch(
            "SELECT platform, workspace, user_id, tokens FROM token_usage WHERE day = $1 "
            "AND (platform, workspace, user_id) IN "
            "(SELECT * FROM unnest($2::text[], $3::text[], $4::text[]))",
            day, [a.platform for a in accounts], [a.workspace for a in accounts],
            [a.user for a in accounts],
        )
        for r in rows:
            out[UsageKey(r[0], r[1], r[2])] = int(r[3])
        return out

    async def claim_quota_notice(self, day: str, account: UsageKey) -> bool:
        """See ``SettingsStore.claim_quota_notice``."""
        rows = await self._fetch(
            "INSERT INTO token_usage (day, platform, workspace, user_id, notified) "
            "VALUES ($1, $2, $3, $4, true) ON CONFLICT (day, platform, workspace, user_id) "
            "DO UPDATE SET notified = true WHERE token_usage.notified = false RETURNING 1",
            day, account.platform, account.workspace, account.user,
        )
        return bool(rows)
