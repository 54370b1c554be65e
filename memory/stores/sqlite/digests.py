"""SQLite SQL for ``memory.catchup_store``: turns by time, a person's last message, digest
schedules and slot claims (tables of the catch-up migration step).

Turns by time read ``turns_channel_sent`` (``channel_id, sent_at``), so a period costs what
it holds, not the channel's length. Claims use the process clock (one file, one machine).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from memory.catchup_store import DigestSchedule, DigestSlot, SlotState
from memory.models import ChannelKey, Turn
from memory.stores.common import TURN_COLS, TurnRow
from memory.stores.sqlite.archive import channel_of
from memory.stores.sqlite.writer import WriteTx

__all__ = [
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
