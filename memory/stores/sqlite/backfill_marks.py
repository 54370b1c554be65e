"""Backfill marks on SQLite (schema step 6): where a channel's backfill after downtime
started, until it has stored all it read (``adapters.backfill`` says why)."""

from __future__ import annotations

import sqlite3
import time

from memory.models import ChannelKey
from memory.stores.sqlite.writer import WriteTx

__all__ = ["begin", "clear", "end", "get"]

_KEY = "platform = ? AND workspace = ? AND channel = ?"


def begin(tx: WriteTx, key: ChannelKey, after_id: str) -> str:
    """Set the mark to ``after_id`` unless one is set; the mark in effect."""
    args = (key.platform, key.workspace, key.channel)
    tx.conn.execute(
        "INSERT OR IGNORE INTO backfill_marks (platform, workspace, channel, after_id, set_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (*args, after_id, time.time()),
    )
    row = tx.conn.execute(f"SELECT after_id FROM backfill_marks WHERE {_KEY}", args).fetchone()
    return str(row[0])


def end(tx: WriteTx, key: ChannelKey, after_id: str) -> None:
    """Clear the mark if it is still ``after_id``."""
    tx.conn.execute(f"DELETE FROM backfill_marks WHERE {_KEY} AND after_id = ?",
                    (key.platform, key.workspace, key.channel, after_id))


def get(conn: sqlite3.Connection, key: ChannelKey) -> str | None:
    """The mark in effect, if any."""
    row = conn.execute(f"SELECT after_id FROM backfill_marks WHERE {_KEY}",
                       (key.platform, key.workspace, key.channel)).fetchone()
    return None if row is None else str(row[0])


def clear(conn: sqlite3.Connection, key: ChannelKey) -> None:
    """Drop the channel's mark (``/reset``: a later backfill must not re-read forgotten
    messages from a mark set before it)."""
    conn.execute(f"DELETE FROM backfill_marks WHERE {_KEY}",
                 (key.platform, key.workspace, key.channel))
