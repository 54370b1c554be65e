"""PostgreSQL side of the embedding role (``memory.embedding_store``): turn vectors in
``turn_embeddings`` (schema step 13) as bytea, scanned with numpy like SQLite's.

Deleting or editing a turn drops its vectors by trigger, in the writing transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from memory.embedding_store import MAX_SCAN, nearest
from memory.models import ChannelKey, Turn
from memory.stores.common import TURN_COLS, TurnRow
from memory.stores.postgres.queries import CHANNEL_ID, by_key
from memory.stores.postgres.turn_search import turns_at

T = TypeVar("T")
Conn = Any  # an asyncpg connection

__all__ = ["PostgresEmbeddings"]

_UNEMBEDDED = (
    f"SELECT {TURN_COLS} FROM turns t WHERE t.channel_id = $1 AND t.seq >= $2 AND t.seq < $3 "
    "AND t.role = 'user' AND NOT EXISTS (SELECT 1 FROM turn_embeddings e "
    "WHERE e.channel_id = t.channel_id AND e.seq = t.seq AND e.model = $4) "
    "ORDER BY t.seq DESC LIMIT $5"
)
_PUT = (
    "INSERT INTO turn_embeddings (channel_id, seq, model, vector) "
    "SELECT channel_id, seq, $1, $2 FROM turns WHERE channel_id = $3 AND seq = $4 AND text = $5 "
    "ON CONFLICT (channel_id, seq, model) DO UPDATE SET vector = excluded.vector RETURNING seq"
)
_VECTORS = (
    "SELECT seq, vector FROM turn_embeddings WHERE channel_id = $1 AND seq < $2 AND model = $3 "
    "ORDER BY seq DESC LIMIT $4"
)


class PostgresEmbeddings:
    """The embedding role, mixed into ``PostgresStore`` (which supplies ``_tx``)."""

    if TYPE_CHECKING:
        async def _tx(self, fn: Callable[[Conn], Awaitable[T]], *, read: bool = False) -> T: ...

    async def unembedded_turns(
        self, key: ChannelKey, model: str, *, below: int | None, span: int, limit: int
    ) -> tuple[list[Turn], int]:
        """See ``memory.embedding_store.EmbeddingStore``."""

        async def run(conn: Conn) -> tuple[list[Turn], int]:
            cid = await conn.fetchval(CHANNEL_ID, *by_key(key))
            if cid is None:
                return [], 0
            top = below
            if top is None:
                top = int(await conn.fetchval(
                    "SELECT coalesce(max(seq), 0) FROM turns WHERE channel_id = $1", cid)) + 1
            rows = await conn.fetch(_UNEMBEDDED, cid, top - span, top, model, limit)
            return [TurnRow(*r).turn(key) for r in rows], top - span

        return await self._tx(run, read=True)

    async def put_embeddings(
        self, key: ChannelKey, model: str, items: Sequence[tuple[Turn, bytes]]
    ) -> int:
        """See ``memory.embedding_store.EmbeddingStore``."""

        async def run(conn: Conn) -> int:
            cid = await conn.fetchval(CHANNEL_ID, *by_key(key))
            if cid is None:
                return 0
            stored = 0
            for turn, vector in items:
                stored += await conn.fetchval(_PUT, model, vector, cid, turn.seq,
                                              turn.text) is not None
            return stored

        return await self._tx(run) if items else 0

    async def nearest_turns(
        self, key: ChannelKey, model: str, query: bytes, *, before_seq: int, limit: int
    ) -> list[Turn]:
        """See ``memory.embedding_store.EmbeddingStore``."""

        async def run(conn: Conn) -> list[Turn]:
            cid = await conn.fetchval(CHANNEL_ID, *by_key(key))
            if cid is None:
                return []
            rows = await conn.fetch(_VECTORS, cid, before_seq, model, MAX_SCAN)
            ranked = nearest(query, [(int(r[0]), bytes(r[1])) for r in rows], limit)
            by_seq = {t.seq: t for t in await turns_at(conn, key, [s for s, _ in ranked])}
            return [by_seq[s] for s, _ in ranked if s in by_seq]

        return await self._tx(run, read=True)

    async def embedding_count(self, key: ChannelKey, model: str) -> int:
        """See ``memory.embedding_store.EmbeddingStore``."""

        async def run(conn: Conn) -> int:
            cid = await conn.fetchval(CHANNEL_ID, *by_key(key))
            if cid is None:
                return 0
            return int(await conn.fetchval(
                "SELECT count(*) FROM turn_embeddings WHERE channel_id = $1 AND model = $2",
                cid, model))

        return await self._tx(run, read=True)
