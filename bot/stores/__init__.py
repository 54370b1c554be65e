"""Storage by role: the memory store plus the application's own roles on its database.

``Storage`` holds ``memory`` (a ``SqliteStore`` or ``PostgresStore``: turns, summaries, the
archive) and one object per role that is not memory: ``settings`` (channel settings),
``usage`` (token counts for quotas), ``digests`` (schedules and slot claims), ``owed``
(replies owed), ``outbox`` (posts in flight) and ``backfill`` (backfill marks). Each role
object is composed on the memory store and shares its one writer (SQLite) or pool
(PostgreSQL); a role that writes in a memory transaction (a debt with its turn, a mark
dropped by ``/reset``) adds a hook to it. ``open`` opens the memory store, then migrates
every role's own ladder (``schema``). The features' roles (``roles.Role``, declared by each
feature of ``bot.features``) are composed, migrated, copied and exported the same way and
found by name (``Storage.role``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.stores import backfill, digests, outbox, owed, settings, usage
from bot.stores.backfill import BackfillMarks, History
from bot.stores.digests import DigestStore
from bot.stores.outbox import OutboxStore
from bot.stores.owed import ReplyLedger
from bot.stores.roles import Role
from bot.stores.schema import Ladder, migrate_postgres, migrate_sqlite
from bot.stores.settings import SettingsStore
from bot.stores.usage import UsageStore
from memory.store import Store
from memory.stores.sqlite.store import SqliteStore

__all__ = ["LADDERS", "Storage"]

LADDERS: tuple[Ladder, ...] = (
    backfill.LADDER, owed.LADDER, settings.LADDER, usage.LADDER, digests.LADDER, outbox.LADDER,
)
"""Every role's ladder, migrated in this order."""


@dataclass
class Storage:
    """The memory store and the role objects composed on it (see the module docstring)."""

    memory: Store
    settings: SettingsStore
    usage: UsageStore
    digests: DigestStore
    owed: ReplyLedger
    outbox: OutboxStore
    backfill: BackfillMarks
    roles: tuple[Role, ...] = ()
    _by_role: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def on(cls, memory: Store, roles: Sequence[Role] = ()) -> Storage:
        """Compose every role on ``memory`` (not opened yet), the features' ``roles`` too;
        the roles' hooks are added."""
        db: Any = memory
        if isinstance(memory, SqliteStore):
            found = {r.name: r.sqlite(memory) for r in roles}
            return cls(memory, settings.SqliteSettings(memory), usage.SqliteUsage(memory),
                       digests.SqliteDigests(memory), owed.SqliteOwed(memory),
                       outbox.SqliteOutbox(memory), backfill.SqliteBackfill(memory),
                       tuple(roles), found)
        found = {r.name: r.postgres(db) for r in roles}
        return cls(memory, settings.PostgresSettings(db), usage.PostgresUsage(db),
                   digests.PostgresDigests(db), owed.PostgresOwed(db),
                   outbox.PostgresOutbox(db), backfill.PostgresBackfill(db), tuple(roles),
                   found)

    def role(self, name: str) -> Any:
        """The object of the feature role ``name`` on this storage (``KeyError``: none)."""
        return self._by_role[name]

    def history(self) -> History:
        """What a backfill after downtime reads and marks (memory plus ``backfill``)."""
        return History(self.memory, self.backfill)

    async def open(self) -> None:
        """Open the memory store, then bring every role's tables up to date."""
        await self.memory.open()
        try:
            ladders = (*LADDERS, *(r.ladder for r in self.roles))
            if isinstance(self.memory, SqliteStore):
                await migrate_sqlite(self.memory, ladders)
            else:
                await migrate_postgres(self.memory, ladders)
        except BaseException:
            await self.memory.close()
            raise

    async def close(self) -> None:
        """Close the memory store (finishing queued writes of every role). Idempotent."""
        await self.memory.close()

    async def __aenter__(self) -> Storage:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
