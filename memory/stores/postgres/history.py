"""``PostgresStore``'s summary history and channel overview (``memory.history``).

``append`` runs inside the transaction of the commit it records (a compaction's
``commit_summary`` or an operator's ``edit_summary``) and prunes the channel to its newest
``keep`` versions there too, so history and summary never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.history import ChannelOverview, SummarySource, SummaryVersion
from memory.models import ChannelKey
from memory.stores.postgres import queries
from memory.stores.postgres.queries import Conn, by_key

__all__ = ["append", "commit_with_history", "edit_summary", "history", "overview", "replace"]

_BY_KEY = "platform = $1 AND workspace = $2 AND channel = $3"
_APPEND = (
    "INSERT INTO summary_history (channel_id, version, text, first_seq, last_seq, "
    "committed_at, source, author) "
    "SELECT id, version, $2, $3, $4, $5, $6, $7 FROM channels WHERE id = $1"
)
_PRUNE = (
    "DELETE FROM summary_history WHERE channel_id = $1 AND id <= ("
    "SELECT id FROM summary_history WHERE channel_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)"
)
_EDIT = (
    "UPDATE channels SET summary = $5, version = version + 1 "
    f"WHERE {_BY_KEY} AND version = $4 RETURNING id, folded_through"
)
_HISTORY = (
    "SELECT id, version, text, first_seq, last_seq, committed_at, source, author "
    f"FROM summary_history WHERE channel_id = (SELECT id FROM channels WHERE {_BY_KEY}) "
    "ORDER BY id DESC LIMIT $4"
)
_OVERVIEW = (
    "SELECT c.platform, c.workspace, c.channel, "
    "(SELECT count(*) FROM turns t WHERE t.channel_id = c.id), "
    "(SELECT count(*) FROM turns t WHERE t.channel_id = c.id AND t.seq > c.folded_through), "
    "(SELECT t.sent_at FROM turns t WHERE t.channel_id = c.id ORDER BY t.seq DESC LIMIT 1), "
    "(SELECT t.sent_at FROM turns t WHERE t.channel_id = c.id AND t.seq > c.folded_through "
    " ORDER BY t.seq LIMIT 1), "
    "c.last_compacted_at, c.version FROM channels c ORDER BY c.id"
)


async def commit_with_history(conn: Conn, key: ChannelKey, keep: int, **commit: Any) -> bool:
    """``queries.commit_summary`` plus its history row, in the caller's transaction."""
    was = await conn.fetchrow(f"SELECT id, folded_through FROM channels WHERE {_BY_KEY}",
                              *by_key(key))
    if not await queries.commit_summary(conn, key=key, **commit):
        return False
    await append(conn, was["id"], commit["text"], int(was["folded_through"]) + 1,
                 commit["folded_through"], commit["now"], "compaction", "", keep)
    return True


async def append(conn: Conn, cid: int, text: str, first_seq: int, last_seq: int, now: float,
                 source: SummarySource, author: str, keep: int) -> None:
    """Record the version the channel row now holds; keep only the newest ``keep``."""
    if keep <= 0:
        return
    await conn.execute(_APPEND, cid, text, first_seq, last_seq, now, source, author)
    await conn.execute(_PRUNE, cid, keep)


async def edit_summary(conn: Conn, key: ChannelKey, expected_version: int, text: str,
                       now: float, author: str, keep: int) -> bool:
    """Replace the summary text if the version is still ``expected_version`` (the same
    check a compaction's commit makes); the fold pointer and counters stay."""
    row = await conn.fetchrow(_EDIT, *by_key(key), expected_version, text)
    if row is None:
        return False
    done = int(row["folded_through"])
    await append(conn, row["id"], text, done + 1, done, now, "edit", author, keep)
    return True


async def history(conn: Conn, key: ChannelKey, limit: int) -> list[SummaryVersion]:
    """The channel's kept versions, newest first."""
    rows = await conn.fetch(_HISTORY, *by_key(key), limit)
    return [SummaryVersion(r[0], key, r[1], r[2], r[3], r[4], r[5], r[6], r[7]) for r in rows]


async def overview(conn: Conn) -> list[ChannelOverview]:
    """Every channel's counts; the pending ones read only the unfolded range."""
    rows = await conn.fetch(_OVERVIEW)
    return [ChannelOverview(ChannelKey(r[0], r[1], r[2]), *r[3:]) for r in rows]


async def replace(conn: Conn, key: ChannelKey, versions: Sequence[SummaryVersion]) -> None:
    """Set the channel's history to copies of ``versions`` (``copy-db``; new ids)."""
    cid = await conn.fetchval(f"SELECT id FROM channels WHERE {_BY_KEY}", *by_key(key))
    if cid is None:
        await conn.execute(queries.CREATE_CHANNEL, *by_key(key))
        cid = await conn.fetchval(f"SELECT id FROM channels WHERE {_BY_KEY}", *by_key(key))
    await conn.execute("DELETE FROM summary_history WHERE channel_id = $1", cid)
    await conn.executemany(
        "INSERT INTO summary_history (channel_id, version, text, first_seq, last_seq, "
        "committed_at, source, author) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        [(cid, v.version, v.text, v.first_seq, v.last_seq, v.committed_at, v.source, v.author)
         for v in sorted(versions, key=lambda v: v.id)],
    )
