"""``SqliteStore``'s summary history and channel overview (``memory.history``).

``append`` runs inside the transaction of the commit it records (a compaction's
``commit_summary`` or an operator's ``edit_summary``) and prunes the channel to its newest
``keep`` versions there too, so history and summary never disagree.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memory.history import ChannelOverview, SummarySource, SummaryVersion
from memory.models import ChannelKey
from memory.stores.sqlite.writer import WriteTx

__all__ = ["append", "edit_summary", "history", "overview", "replace"]

_COLS = "id, version, text, first_seq, last_seq, committed_at, source, author"


def append(conn: sqlite3.Connection, cid: int, text: str, first_seq: int, last_seq: int,
           now: float, source: SummarySource, author: str, keep: int) -> None:
    """Record the version the channel row now holds; keep only the newest ``keep``."""
    if keep <= 0:
        return
    conn.execute(
        "INSERT INTO summary_history (channel_id, version, text, first_seq, last_seq, "
        "committed_at, source, author) "
        "SELECT id, version, ?, ?, ?, ?, ?, ? FROM channels WHERE id = ?",
        (text, first_seq, last_seq, now, source, author, cid),
    )
    conn.execute(
        "DELETE FROM summary_history WHERE channel_id = ? AND id <= ("
        "SELECT id FROM summary_history WHERE channel_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
        (cid, cid, keep),
    )


def edit_summary(tx: WriteTx, key: ChannelKey, expected_version: int, text: str, now: float,
                 author: str, keep: int) -> bool:
    """Replace the summary text if the version is still ``expected_version`` (the same
    check a compaction's commit makes); the fold pointer and counters stay."""
    cid = tx.channel_id(key, create=False)
    if cid is None:
        return False
    cur = tx.conn.execute(
        "UPDATE channels SET summary = ?, version = version + 1 WHERE id = ? AND version = ? "
        "RETURNING folded_through",
        (text, cid, expected_version),
    )
    row = cur.fetchone()
    if row is None:
        return False
    append(tx.conn, cid, text, int(row[0]) + 1, int(row[0]), now, "edit", author, keep)
    return True


def history(conn: sqlite3.Connection, key: ChannelKey, limit: int) -> list[SummaryVersion]:
    """The channel's kept versions, newest first."""
    rows = conn.execute(
        f"SELECT {_COLS} FROM summary_history WHERE channel_id = ("
        "SELECT id FROM channels WHERE platform = ? AND workspace = ? AND channel = ?) "
        "ORDER BY id DESC LIMIT ?",
        (key.platform, key.workspace, key.channel, limit),
    ).fetchall()
    return [SummaryVersion(r[0], key, r[1], r[2], r[3], r[4], r[5], r[6], r[7]) for r in rows]


def overview(conn: sqlite3.Connection) -> list[ChannelOverview]:
    """Every channel's counts; the pending ones read only the unfolded range."""
    rows = conn.execute(
        "SELECT c.platform, c.workspace, c.channel, "
        "(SELECT count(*) FROM turns t WHERE t.channel_id = c.id), "
        "(SELECT count(*) FROM turns t WHERE t.channel_id = c.id AND t.seq > c.folded_through), "
        "(SELECT t.sent_at FROM turns t WHERE t.channel_id = c.id ORDER BY t.seq DESC LIMIT 1), "
        "(SELECT t.sent_at FROM turns t WHERE t.channel_id = c.id AND t.seq > c.folded_through "
        " ORDER BY t.seq LIMIT 1), "
        "c.last_compacted_at, c.version FROM channels c ORDER BY c.id"
    ).fetchall()
    return [ChannelOverview(ChannelKey(r[0], r[1], r[2]), *r[3:]) for r in rows]


def replace(tx: WriteTx, key: ChannelKey, versions: Sequence[SummaryVersion]) -> None:
    """Set the channel's history to copies of ``versions`` (``copy-db``; new ids)."""
    cid = tx.new_channel_id(key)
    tx.conn.execute("DELETE FROM summary_history WHERE channel_id = ?", (cid,))
    tx.conn.executemany(
        "INSERT INTO summary_history (channel_id, version, text, first_seq, last_seq, "
        "committed_at, source, author) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(cid, v.version, v.text, v.first_seq, v.last_seq, v.committed_at, v.source, v.author)
         for v in sorted(versions, key=lambda v: v.id)],
    )
