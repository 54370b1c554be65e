"""PostgreSQL SQL for ``memory.catchup_store``: turns by time, a person's last message,
digest schedules and slot claims (tables of the catch-up migration step).

Claims expire by the database clock, so replicas with skewed clocks agree on when an
unfinished claim may be taken over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory.catchup_store import DigestSchedule, DigestSlot, SlotState
from memory.models import ChannelKey, Turn
from memory.stores.common import TurnRow, columns, positive_ttl
from memory.stores.postgres.queries import by_key

__all__ = [
    "CLAIM_SLOT",
    "DELETE_SCHEDULE",
    "FINISH_SLOT",
    "LAST_TURN_BY",
    "SCHEDULE",
    "SCHEDULES",
    "SET_SCHEDULE",
    "SLOTS",
    "TURNS_BETWEEN",
    "PostgresDigests",
    "by_key",
    "schedule_of",
    "slot_of",
    "turn_of",
]

_T_COLS = columns(TurnRow._fields, "t.")
_KEY = "platform = $1 AND workspace = $2 AND channel = $3"
_CHANNEL = (
    "FROM channels c JOIN turns t ON t.channel_id = c.id "
    "WHERE c.platform = $1 AND c.workspace = $2 AND c.channel = $3 "
)
_SCHED_COLS = (
    "platform, workspace, channel, every, weekday, minute, tz, created_at, created_by, in_thread"
)

TURNS_BETWEEN = (
    f"SELECT {_T_COLS} {_CHANNEL} AND t.sent_at >= $4 AND t.sent_at < $5 "
    "ORDER BY t.sent_at, t.seq LIMIT $6"
)
LAST_TURN_BY = (
    f"SELECT {_T_COLS} {_CHANNEL} AND t.sent_at < $4 AND t.author_id = $5 AND t.role = 'user' "
    "ORDER BY t.sent_at DESC LIMIT 1"
)
SET_SCHEDULE = (
    f"INSERT INTO digest_schedules ({_SCHED_COLS}) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
    "ON CONFLICT (platform, workspace, channel) DO UPDATE SET every = excluded.every, "
    "weekday = excluded.weekday, minute = excluded.minute, tz = excluded.tz, "
    "created_at = excluded.created_at, created_by = excluded.created_by, "
    "in_thread = excluded.in_thread"
)
DELETE_SCHEDULE = f"DELETE FROM digest_schedules WHERE {_KEY} RETURNING channel"
SCHEDULE = f"SELECT {_SCHED_COLS} FROM digest_schedules WHERE {_KEY}"
SCHEDULES = f"SELECT {_SCHED_COLS} FROM digest_schedules"
CLAIM_SLOT = (
    "INSERT INTO digest_slots (platform, workspace, channel, slot_at, owner, state, expires_at) "
    "VALUES ($1, $2, $3, $4, $5, 'claimed', clock_timestamp() + $6 * interval '1 second') "
    "ON CONFLICT (platform, workspace, channel, slot_at) DO UPDATE SET "
    "owner = excluded.owner, expires_at = excluded.expires_at "
    "WHERE digest_slots.state = 'claimed' AND digest_slots.expires_at <= clock_timestamp() "
    "RETURNING owner"
)
FINISH_SLOT = (
    f"UPDATE digest_slots SET state = $6 WHERE {_KEY} AND slot_at = $4 AND owner = $5 "
    "AND state = 'claimed' RETURNING owner"
)
SLOTS = (
    f"SELECT slot_at, owner, state FROM digest_slots WHERE {_KEY} ORDER BY slot_at DESC LIMIT $4"
)


def turn_of(key: ChannelKey, row: Any) -> Turn:
    """A turn from a row in ``TurnRow`` order."""
    return TurnRow(*row).turn(key)


def schedule_of(row: Any) -> DigestSchedule:
    """A schedule from a ``SCHEDULE`` row."""
    p, w, c, every, weekday, minute, tz, created_at, created_by, in_thread = row
    return DigestSchedule(ChannelKey(p, w, c), every, int(weekday), int(minute), tz,
                          float(created_at), created_by, bool(in_thread))


def slot_of(key: ChannelKey, row: Any) -> DigestSlot:
    """A claim from a ``SLOTS`` row."""
    state: SlotState = row[2]
    return DigestSlot(key, float(row[0]), row[1], state)


class PostgresDigests:
    """The catch-up and digest roles, mixed into ``PostgresStore`` (which supplies
    ``_fetch``)."""

    if TYPE_CHECKING:
        async def _fetch(self, sql: str, *args: Any) -> list[Any]: ...


    async def turns_between(
        self, key: ChannelKey, start: float, end: float, *, limit: int = 50_000
    ) -> list[Turn]:
        """Stored turns sent in ``[start, end)``, oldest first (see ``CatchupStore``)."""
        rows = await self._fetch(TURNS_BETWEEN, *by_key(key), start, end, limit)
        return [turn_of(key, r) for r in rows]

    async def last_turn_by(self, key: ChannelKey, author_id: str, before: float) -> Turn | None:
        """The newest user turn of ``author_id`` before ``before``."""
        rows = await self._fetch(LAST_TURN_BY, *by_key(key), before, author_id)
        return turn_of(key, rows[0]) if rows else None

    async def set_digest_schedule(self, schedule: DigestSchedule) -> None:
        """Create or replace the channel's digest schedule."""
        s = schedule
        await self._fetch(SET_SCHEDULE, *by_key(s.key), s.every, s.weekday, s.minute,
                          s.tz, s.created_at, s.created_by, s.in_thread)

    async def delete_digest_schedule(self, key: ChannelKey) -> bool:
        """Remove the channel's digest schedule."""
        return bool(await self._fetch(DELETE_SCHEDULE, *by_key(key)))

    async def digest_schedule(self, key: ChannelKey) -> DigestSchedule | None:
        """The channel's digest schedule, if any."""
        rows = await self._fetch(SCHEDULE, *by_key(key))
        return schedule_of(rows[0]) if rows else None

    async def digest_schedules(self) -> list[DigestSchedule]:
        """Every digest schedule."""
        return [schedule_of(r) for r in await self._fetch(SCHEDULES)]

    async def claim_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, ttl: float
    ) -> bool:
        """Claim a digest slot (see ``DigestStore.claim_digest_slot``)."""
        ttl = positive_ttl(ttl)
        return bool(await self._fetch(CLAIM_SLOT, *by_key(key), slot_at, owner, ttl))

    async def finish_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, state: SlotState
    ) -> bool:
        """Mark a held slot as posted or skipped."""
        return bool(await self._fetch(FINISH_SLOT, *by_key(key), slot_at, owner, state))

    async def digest_slots(self, key: ChannelKey, *, limit: int = 50) -> list[DigestSlot]:
        """The channel's slot claims, newest first."""
        rows = await self._fetch(SLOTS, *by_key(key), limit)
        return [slot_of(key, r) for r in rows]
