"""SQLite side of the embedding role (``memory.embedding_store``): turn vectors in
``turn_embeddings`` (schema step 16), a BLOB each, scanned with numpy.

Deleting or editing a turn drops its vectors by trigger, in the writing transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from memory.embedding_store import MAX_SCAN, nearest
from memory.models import ChannelKey, Turn
from memory.stores.common import TURN_COLS, TurnRow
from memory.stores.sqlite.archive import channel_of
from memory.stores.sqlite.turn_search import turns_at
from memory.stores.sqlite.writer import WriteTx

P = ParamSpec("P")
T = TypeVar("T")

__all__ = ["SqliteEmbeddings"]

_UNEMBEDDED = (
    f"SELECT {TURN_COLS} FROM turns t WHERE t.channel_id = ? AND t.seq >= ? AND t.seq < ? "
    "AND t.role = 'user' AND NOT EXISTS (SELECT 1 FROM turn_embeddings e "
    "WHERE e.channel_id = t.channel_id AND e.seq = t.seq AND e.model = ?) "
    "ORDER BY t.seq DESC LIMIT ?"
)
_PUT = (
    "INSERT OR REPLACE INTO turn_embeddings (channel_id, seq, model, vector) "
    "SELECT channel_id, seq, ?, ? FROM turns WHERE channel_id = ? AND seq = ? AND text = ?"
)
_VECTORS = (
    "SELECT seq, vector FROM turn_embeddings WHERE channel_id = ? AND seq < ? AND model = ? "
    "ORDER BY seq DESC LIMIT ?"
)


def unembedded(conn: sqlite3.Connection, key: ChannelKey, model: str, below: int | None,
               span: int, limit: int) -> tuple[list[Turn], int]:
    """See ``EmbeddingStore.unembedded_turns``."""
    cid = channel_of(conn, key)
    if cid is None:
        return [], 0
    if below is None:
        top = conn.execute("SELECT max(seq) FROM turns WHERE channel_id = ?", (cid,)).fetchone()
        below = int(top[0] or 0) + 1
    rows = conn.execute(_UNEMBEDDED, (cid, below - span, below, model, limit)).fetchall()
    return [TurnRow(*r).turn(key) for r in rows], below - span


def put(tx: WriteTx, key: ChannelKey, model: str, items: Sequence[tuple[Turn, bytes]]) -> int:
    """See ``EmbeddingStore.put_embeddings``."""
    cid = channel_of(tx.conn, key)
    if cid is None or not items:
        return 0
    stored = 0
    for turn, vector in items:
        stored += tx.conn.execute(_PUT, (model, vector, cid, turn.seq, turn.text)).rowcount
    return stored


def closest(conn: sqlite3.Connection, key: ChannelKey, model: str, query: bytes,
            before_seq: int, limit: int) -> list[Turn]:
    """See ``EmbeddingStore.nearest_turns``."""
    cid = channel_of(conn, key)
    if cid is None:
        return []
    rows = conn.execute(_VECTORS, (cid, before_seq, model, MAX_SCAN)).fetchall()
    ranked = nearest(query, [(int(s), bytes(v)) for s, v in rows], limit)
    by_seq = {t.seq: t for t in turns_at(conn, key, [s for s, _ in ranked])}
    return [by_seq[s] for s, _ in ranked if s in by_seq]


def count(conn: sqlite3.Connection, key: ChannelKey, model: str) -> int:
    """See ``EmbeddingStore.embedding_count``."""
    cid = channel_of(conn, key)
    if cid is None:
        return 0
    row = conn.execute("SELECT count(*) FROM turn_embeddings WHERE channel_id = ? AND model = ?",
                       (cid, model)).fetchone()
    return int(row[0])


class SqliteEmbeddings:
    """The embedding role, mixed into ``SqliteStore`` (which supplies ``_read``/``_write``)."""

    if TYPE_CHECKING:
        async def _write(self, fn: Callable[Concatenate[WriteTx, P], T], *args: P.args,
                         **kwargs: P.kwargs) -> T: ...

        async def _read(self, fn: Callable[Concatenate[sqlite3.Connection, P], T],
                        *args: P.args, **kwargs: P.kwargs) -> T: ...

    async def unembedded_turns(
        self, key: ChannelKey, model: str, *, below: int | None, span: int, limit: int
    ) -> tuple[list[Turn], int]:
        """See ``memory.embedding_store.EmbeddingStore``."""
        return await self._read(unembedded, key, model, below, span, limit)

    async def put_embeddings(
        self, key: ChannelKey, model: str, items: Sequence[tuple[Turn, bytes]]
    ) -> int:
        """See ``memory.embedding_store.EmbeddingStore``."""
        return await self._write(put, key, model, tuple(items))

    async def nearest_turns(
        self, key: ChannelKey, model: str, query: bytes, *, before_seq: int, limit: int
    ) -> list[Turn]:
        """See ``memory.embedding_store.EmbeddingStore``."""
        return await self._read(closest, key, model, query, before_seq, limit)

    async def embedding_count(self, key: ChannelKey, model: str) -> int:
        """See ``memory.embedding_store.EmbeddingStore``."""
        return await self._read(count, key, model)
