"""SQLite SQL for ``memory.catchup_store``: turns by time, a person's last message, digest
schedules and slot claims (tables of the catch-up migration step).

Turns by time read ``turns_channel_sent`` (``channel_id, sent_at``), so a period costs what
it holds, not the channel's length. Claims use the process clock (one file, one machine).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from memory.catchup_store import DigestSchedule, DigestSlot, SlotState
from memory.models import ChannelKey, Turn
from memory.stores.common import TURN_COLS, TurnRow, positive_ttl
from memory.stores.sqlite.archive import channel_of
from memory.stores.sqlite.writer import WriteTx

P = ParamSpec("P")
T = TypeVar("T")

__all__ = [
    "SqliteDigests",
    "claim_slot",
    "delete_schedule",
    "finish_slot",
    "last_turn_by",
    "schedule",
    "schedules",
    "set_schedule",
    "slots",
    "turns_between",
]

_KEY = "platform = ? AND workspace = ? AND channel = ?"
_SCHED_COLS = (
    "platform, workspace, channel, every, weekday, minute, tz, created_at, created_by, in_thread"
)


def _args(key: ChannelKey) -> tuple[str, str, str]:
    return key.platform, key.workspace, key.channel


def turns_between(
    conn: sqlite3.Connection, key: ChannelKey, start: float, end: float, limit: int
) -> list[Turn]:
    """Stored turns with ``start <= sent_at < end``, oldest first."""
    cid = channel_of(conn, key)
    if cid is None:
        return []
    rows = conn.execute(
        f"SELECT {TURN_COLS} FROM turns INDEXED BY turns_channel_sent "
        "WHERE channel_id = ? AND sent_at >= ? AND sent_at < ? ORDER BY sent_at, seq LIMIT ?",
        (cid, start, end, limit),
    ).fetchall()
    return [TurnRow(*r).turn(key) for r in rows]


def last_turn_by(
    conn: sqlite3.Connection, key: ChannelKey, author_id: str, before: float
) -> Turn | None:
    """The newest user turn of ``author_id`` before ``before``."""
    cid = channel_of(conn, key)
    if cid is None:
        return None
    row = conn.execute(
        f"SELECT {TURN_COLS} FROM turns INDEXED BY turns_channel_sent "
        "WHERE channel_id = ? AND sent_at < ? AND author_id = ? AND role = 'user' "
        "ORDER BY sent_at DESC LIMIT 1",
        (cid, before, author_id),
    ).fetchone()
    return None if row is None else TurnRow(*row).turn(key)


def _schedule(row: Any) -> DigestSchedule:
    p, w, c, every, weekday, minute, tz, created_at, created_by, in_thread = row
    return DigestSchedule(ChannelKey(p, w, c), every, int(weekday), int(minute), tz,
                          float(created_at), created_by, bool(in_thread))


def set_schedule(tx: WriteTx, s: DigestSchedule) -> None:
    """Create or replace the channel's schedule."""
    tx.conn.execute(
        f"INSERT OR REPLACE INTO digest_schedules ({_SCHED_COLS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*_args(s.key), s.every, s.weekday, s.minute, s.tz, s.created_at, s.created_by,
         int(s.in_thread)),
    )


def delete_schedule(tx: WriteTx, key: ChannelKey) -> bool:
    """Remove the channel's schedule."""
    return tx.conn.execute(f"DELETE FROM digest_schedules WHERE {_KEY}", _args(key)).rowcount == 1


def schedule(conn: sqlite3.Connection, key: ChannelKey) -> DigestSchedule | None:
    """The channel's schedule, if any."""
    row = conn.execute(
        f"SELECT {_SCHED_COLS} FROM digest_schedules WHERE {_KEY}", _args(key)
    ).fetchone()
    return None if row is None else _schedule(row)


def schedules(conn: sqlite3.Connection) -> list[DigestSchedule]:
    """Every schedule."""
    rows = conn.execute(f"SELECT {_SCHED_COLS} FROM digest_schedules").fetchall()
    return [_schedule(r) for r in rows]


def claim_slot(tx: WriteTx, key: ChannelKey, slot_at: float, owner: str, ttl: float) -> bool:
    """Insert the slot's claim, or take over an unfinished one that expired."""
    now = time.time()
    return tx.conn.execute(
        "INSERT INTO digest_slots (platform, workspace, channel, slot_at, owner, state, "
        "expires_at) VALUES (?, ?, ?, ?, ?, 'claimed', ?) "
        "ON CONFLICT (platform, workspace, channel, slot_at) DO UPDATE SET "
        "owner = excluded.owner, expires_at = excluded.expires_at "
        "WHERE digest_slots.state = 'claimed' AND digest_slots.expires_at <= ?",
        (*_args(key), slot_at, owner, now + ttl, now),
    ).rowcount == 1


def finish_slot(tx: WriteTx, key: ChannelKey, slot_at: float, owner: str, state: SlotState) -> bool:
    """Mark the slot ``owner`` holds as final."""
    return tx.conn.execute(
        f"UPDATE digest_slots SET state = ? WHERE {_KEY} AND slot_at = ? AND owner = ? "
        "AND state = 'claimed'",
        (state, *_args(key), slot_at, owner),
    ).rowcount == 1


def slots(conn: sqlite3.Connection, key: ChannelKey, limit: int) -> list[DigestSlot]:
    """The channel's claims, newest first."""
    rows = conn.execute(
        f"SELECT slot_at, owner, state FROM digest_slots WHERE {_KEY} "
        "ORDER BY slot_at DESC LIMIT ?",
        (*_args(key), limit),
    ).fetchall()
    return [DigestSlot(key, float(r[0]), r[1], r[2]) for r in rows]


class SqliteDigests:
    """The catch-up and digest roles, mixed into ``SqliteStore`` (which supplies
    ``_read``/``_write``)."""

    if TYPE_CHECKING:
        async def _write(self, fn: Callable[Concatenate[WriteTx, P], T], *args: P.args,
                         **kwargs: P.kwargs) -> T: ...

        async def _read(self, fn: Callable[Concatenate[sqlite3.Connection, P], T],
                        *args: P.args, **kwargs: P.kwargs) -> T: ...


    async def turns_between(
        self, key: ChannelKey, start: float, end: float, *, limit: int = 50_000
    ) -> list[Turn]:
        """Stored turns sent in ``[start, end)``, oldest first (see ``CatchupStore``)."""
        return await self._read(turns_between, key, start, end, limit)

    async def last_turn_by(self, key: ChannelKey, author_id: str, before: float) -> Turn | None:
        """The newest user turn of ``author_id`` before ``before``."""
        return await self._read(last_turn_by, key, author_id, before)

    async def set_digest_schedule(self, schedule: DigestSchedule) -> None:
        """Create or replace the channel's digest schedule."""
        await self._write(set_schedule, schedule)

    async def delete_digest_schedule(self, key: ChannelKey) -> bool:
        """Remove the channel's digest schedule."""
        return await self._write(delete_schedule, key)

    async def digest_schedule(self, key: ChannelKey) -> DigestSchedule | None:
        """The channel's digest schedule, if any."""
        return await self._read(schedule, key)

    async def digest_schedules(self) -> list[DigestSchedule]:
        """Every digest schedule."""
        return await self._read(schedules)

    async def claim_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, ttl: float
    ) -> bool:
        """Claim a digest slot (see ``DigestStore.claim_digest_slot``)."""
        return await self._write(claim_slot, key, slot_at, owner, positive_ttl(ttl))

    async def finish_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, state: SlotState
    ) -> bool:
        """Mark a held slot as posted or skipped."""
        return await self._write(finish_slot, key, slot_at, owner, state)

    async def digest_slots(self, key: ChannelKey, *, limit: int = 50) -> list[DigestSlot]:
        """The channel's slot claims, newest first."""
        return await self._read(slots, key, limit)
