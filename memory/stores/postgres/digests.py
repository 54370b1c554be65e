"""PostgreSQL SQL for ``memory.catchup_store``: turns by time, a person's last message,
digest schedules and slot claims (tables of the catch-up migration step).

Claims expire by the database clock, so replicas with skewed clocks agree on when an
unfinished claim may be taken over.
"""

from __future__ import annotations

from typing import Any

from memory.catchup_store import DigestSchedule, DigestSlot, SlotState
from memory.models import ChannelKey, Turn
from memory.stores.common import TurnRow, columns
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
