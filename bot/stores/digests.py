"""Digest schedules and the slot claims that make a digest post exactly once.

One schedule per channel, and a *slot claim* per (channel, slot time) inserted by whoever
posts that slot. Two replicas, or a restarted process, racing for one slot insert the same
primary key; only one wins. A claim that was taken but never finished (its holder died
before posting) expires after its ttl and may be taken again, so a crash costs a late post,
never a lost or a doubled one once ``finish_digest_slot`` ran. SQLite claims use the
process clock (one file, one machine); PostgreSQL's the database clock, so replicas with
skewed clocks agree.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from bot.stores.schema import Ladder, Step
from bot.stores.sql import numbered
from memory.models import ChannelKey
from memory.stores.common import positive_ttl
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.writer import WriteTx

__all__ = [
    "LADDER", "DigestSchedule", "DigestSlot", "DigestStore", "PostgresDigests", "SlotState",
    "SqliteDigests",
]

SlotState = Literal["claimed", "posted", "skipped"]


@dataclass(frozen=True, slots=True)
class DigestSchedule:
    """When a channel's digest is posted: ``every`` day or week (``weekday`` 0 = Monday,
    -1 for daily) at ``minute`` minutes after local midnight in the IANA zone ``tz``,
    in the channel or (``in_thread``) in a thread under a heading message.

    ``created_at`` bounds the slots: a slot before the schedule existed is never posted.
    """

    key: ChannelKey
    every: Literal["daily", "weekly"]
    weekday: int
    minute: int
    tz: str
    created_at: float
    created_by: str = ""
    in_thread: bool = False  # post a heading in the channel and the digest in its thread


@dataclass(frozen=True, slots=True)
class DigestSlot:
    """One claimed slot: who took it and what became of it."""

    key: ChannelKey
    slot_at: float
    owner: str
    state: SlotState


@runtime_checkable
class DigestStore(Protocol):
    """Digest schedules and exactly-once slot claims."""

    async def set_digest_schedule(self, schedule: DigestSchedule) -> None:
        """Create or replace the channel's schedule."""

    async def delete_digest_schedule(self, key: ChannelKey) -> bool:
        """Remove the channel's schedule; False if it had none."""

    async def digest_schedule(self, key: ChannelKey) -> DigestSchedule | None:
        """The channel's schedule, if any."""

    async def digest_schedules(self) -> list[DigestSchedule]:
        """Every schedule."""

    async def claim_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, ttl: float
    ) -> bool:
        """True if ``owner`` now holds the slot: nobody had claimed it, or a claim that was
        never finished expired (``ttl`` seconds after it was taken)."""

    async def finish_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, state: SlotState
    ) -> bool:
        """Mark a slot ``owner`` holds as ``posted`` or ``skipped`` (final: never reclaimed)."""

    async def digest_slots(self, key: ChannelKey, *, limit: int = 50) -> list[DigestSlot]:
        """The channel's slot claims, newest first."""


LADDER = Ladder("digests", (
    Step(
        sqlite="""
        CREATE TABLE IF NOT EXISTS digest_schedules (
            platform TEXT NOT NULL, workspace TEXT NOT NULL, channel TEXT NOT NULL,
            every TEXT NOT NULL CHECK (every IN ('daily', 'weekly')),
            weekday INTEGER NOT NULL, minute INTEGER NOT NULL, tz TEXT NOT NULL,
            created_at REAL NOT NULL, created_by TEXT NOT NULL,
            in_thread INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (platform, workspace, channel)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS digest_slots (
            platform TEXT NOT NULL, workspace TEXT NOT NULL, channel TEXT NOT NULL,
            slot_at REAL NOT NULL, owner TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('claimed', 'posted', 'skipped')),
            expires_at REAL NOT NULL,
            PRIMARY KEY (platform, workspace, channel, slot_at)
        ) WITHOUT ROWID;
        """,
        postgres="""
        CREATE TABLE IF NOT EXISTS digest_schedules (
            platform text NOT NULL, workspace text NOT NULL, channel text NOT NULL,
            every text NOT NULL CHECK (every IN ('daily', 'weekly')),
            weekday integer NOT NULL, minute integer NOT NULL, tz text NOT NULL,
            created_at double precision NOT NULL, created_by text NOT NULL,
            in_thread boolean NOT NULL DEFAULT false,
            PRIMARY KEY (platform, workspace, channel)
        );
        CREATE TABLE IF NOT EXISTS digest_slots (
            platform text NOT NULL, workspace text NOT NULL, channel text NOT NULL,
            slot_at double precision NOT NULL, owner text NOT NULL,
            state text NOT NULL CHECK (state IN ('claimed', 'posted', 'skipped')),
            expires_at timestamptz NOT NULL,
            PRIMARY KEY (platform, workspace, channel, slot_at)
        );
        """,
        marker=("digest_slots", "state"),
    ),
))

_KEY = "platform = ? AND workspace = ? AND channel = ?"
_SCHED_COLS = (
    "platform, workspace, channel, every, weekday, minute, tz, created_at, created_by, in_thread"
)
SET_SCHEDULE = (
    f"INSERT INTO digest_schedules ({_SCHED_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (platform, workspace, channel) DO UPDATE SET every = excluded.every, "
    "weekday = excluded.weekday, minute = excluded.minute, tz = excluded.tz, "
    "created_at = excluded.created_at, created_by = excluded.created_by, "
    "in_thread = excluded.in_thread"
)
DELETE_SCHEDULE = f"DELETE FROM digest_schedules WHERE {_KEY} RETURNING channel"
SCHEDULE = f"SELECT {_SCHED_COLS} FROM digest_schedules WHERE {_KEY}"
SCHEDULES = f"SELECT {_SCHED_COLS} FROM digest_schedules"
FINISH_SLOT = (
    f"UPDATE digest_slots SET state = ? WHERE {_KEY} AND slot_at = ? AND owner = ? "
    "AND state = 'claimed' RETURNING owner"
)
SLOTS = f"SELECT slot_at, owner, state FROM digest_slots WHERE {_KEY} ORDER BY slot_at DESC LIMIT ?"
_CLAIM = (
    "INSERT INTO digest_slots (platform, workspace, channel, slot_at, owner, state, expires_at) "
    "VALUES (?, ?, ?, ?, ?, 'claimed', {until}) "
    "ON CONFLICT (platform, workspace, channel, slot_at) DO UPDATE SET "
    "owner = excluded.owner, expires_at = excluded.expires_at "
    "WHERE digest_slots.state = 'claimed' AND digest_slots.expires_at <= {now} RETURNING owner"
)
_SQLITE_CLAIM = _CLAIM.format(until="?", now="?")
_PG_CLAIM = numbered(_CLAIM.format(until="clock_timestamp() + ? * interval '1 second'",
                                   now="clock_timestamp()"))


def _args(key: ChannelKey) -> tuple[str, str, str]:
    return key.platform, key.workspace, key.channel


def _schedule(row: Any) -> DigestSchedule:
    p, w, c, every, weekday, minute, tz, created_at, created_by, in_thread = row
    return DigestSchedule(ChannelKey(p, w, c), every, int(weekday), int(minute), tz,
                          float(created_at), created_by, bool(in_thread))


def _slot(key: ChannelKey, row: Any) -> DigestSlot:
    state: SlotState = row[2]
    return DigestSlot(key, float(row[0]), row[1], state)


def _schedule_values(s: DigestSchedule) -> tuple[Any, ...]:
    return (*_args(s.key), s.every, s.weekday, s.minute, s.tz, s.created_at, s.created_by,
            s.in_thread)


# ---------------------------------------------------------------------------- SQLite


def _set(tx: WriteTx, s: DigestSchedule) -> None:
    tx.conn.execute(SET_SCHEDULE, _schedule_values(s))


def _found(tx: WriteTx, sql: str, args: tuple[Any, ...]) -> bool:
    return tx.conn.execute(sql, args).fetchone() is not None


def _one(conn: sqlite3.Connection, key: ChannelKey) -> DigestSchedule | None:
    row = conn.execute(SCHEDULE, _args(key)).fetchone()
    return None if row is None else _schedule(row)


def _all(conn: sqlite3.Connection) -> list[DigestSchedule]:
    return [_schedule(r) for r in conn.execute(SCHEDULES).fetchall()]


def _claim(tx: WriteTx, key: ChannelKey, slot_at: float, owner: str, ttl: float) -> bool:
    now = time.time()
    return _found(tx, _SQLITE_CLAIM, (*_args(key), slot_at, owner, now + ttl, now))


def _slots(conn: sqlite3.Connection, key: ChannelKey, limit: int) -> list[DigestSlot]:
    return [_slot(key, r) for r in conn.execute(SLOTS, (*_args(key), limit)).fetchall()]


class SqliteDigests:
    """``DigestStore`` on a ``SqliteStore``'s writer and readers."""

    def __init__(self, db: SqliteStore) -> None:
        self.db = db

    async def set_digest_schedule(self, schedule: DigestSchedule) -> None:
        """Create or replace the channel's digest schedule."""
        await self.db.write(_set, schedule)

    async def delete_digest_schedule(self, key: ChannelKey) -> bool:
        """Remove the channel's digest schedule."""
        return await self.db.write(_found, DELETE_SCHEDULE, _args(key))

    async def digest_schedule(self, key: ChannelKey) -> DigestSchedule | None:
        """The channel's digest schedule, if any."""
        return await self.db.read(_one, key)

    async def digest_schedules(self) -> list[DigestSchedule]:
        """Every digest schedule."""
        return await self.db.read(_all)

    async def claim_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, ttl: float
    ) -> bool:
        """Claim a digest slot (see ``DigestStore.claim_digest_slot``)."""
        return await self.db.write(_claim, key, slot_at, owner, positive_ttl(ttl))

    async def finish_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, state: SlotState
    ) -> bool:
        """Mark a held slot as posted or skipped."""
        return await self.db.write(_found, FINISH_SLOT, (state, *_args(key), slot_at, owner))

    async def digest_slots(self, key: ChannelKey, *, limit: int = 50) -> list[DigestSlot]:
        """The channel's slot claims, newest first."""
        return await self.db.read(_slots, key, limit)


# ---------------------------------------------------------------------------- PostgreSQL


class PostgresDigests:
    """``DigestStore`` on a ``PostgresStore``'s pool."""

    def __init__(self, db: Any) -> None:
        self.db = db

    async def set_digest_schedule(self, schedule: DigestSchedule) -> None:
        """Create or replace the channel's digest schedule."""
        await self.db.fetch(numbered(SET_SCHEDULE), *_schedule_values(schedule))

    async def delete_digest_schedule(self, key: ChannelKey) -> bool:
        """Remove the channel's digest schedule."""
        return bool(await self.db.fetch(numbered(DELETE_SCHEDULE), *_args(key)))

    async def digest_schedule(self, key: ChannelKey) -> DigestSchedule | None:
        """The channel's digest schedule, if any."""
        rows = await self.db.fetch(numbered(SCHEDULE), *_args(key))
        return _schedule(rows[0]) if rows else None

    async def digest_schedules(self) -> list[DigestSchedule]:
        """Every digest schedule."""
        return [_schedule(r) for r in await self.db.fetch(SCHEDULES)]

    async def claim_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, ttl: float
    ) -> bool:
        """Claim a digest slot (see ``DigestStore.claim_digest_slot``)."""
        return bool(await self.db.fetch(_PG_CLAIM, *_args(key), slot_at, owner,
                                        positive_ttl(ttl)))

    async def finish_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, state: SlotState
    ) -> bool:
        """Mark a held slot as posted or skipped."""
        return bool(await self.db.fetch(numbered(FINISH_SLOT), state, *_args(key), slot_at,
                                        owner))

    async def digest_slots(self, key: ChannelKey, *, limit: int = 50) -> list[DigestSlot]:
        """The channel's slot claims, newest first."""
        return [_slot(key, r) for r in await self.db.fetch(numbered(SLOTS), *_args(key), limit)]
