"""SQLite reads for ``memory.catchup_store.CatchupStore``: turns by the time they were sent
and a person's last message.

Both read ``turns_channel_sent`` (``channel_id, sent_at``), so a period costs what it holds,
not the channel's length.
"""

from __future__ import annotations

import sqlite3

from memory.models import ChannelKey, Turn
from memory.stores.common import TURN_COLS, TurnRow
from memory.stores.sqlite.archive import channel_of

__all__ = ["last_turn_by", "turns_between"]


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
