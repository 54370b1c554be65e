"""``PostgresStore``'s search over every stored turn: ``ts_rank`` over the GIN index of
``turns.terms`` (schema step 4).

``terms`` is ``to_tsvector('simple', common.turn_terms(text))``, written in the statement
that stores or edits the turn, so the index is in step with the turns in every
transaction. A query uses the rule of the SQLite store (``common.pick_turn_terms``): only
terms that occur, the rarest first, none too common. Occurrence is one ``EXISTS`` per term
on the GIN index; how common a term is comes from the planner's statistics of the column
(``pg_stats.most_common_elems``, which ANALYZE keeps for the most frequent lexemes of a
tsvector): a term not among them counts as rare, so rare terms keep the query's order.
Rows stored before step 4 are indexed by ``backfill`` at open, in batches.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory.models import ChannelKey, Turn
from memory.stores.common import TURN_COLS, TurnRow, pick_turn_terms, turn_seqs, turn_terms
from memory.stores.postgres.queries import CHANNEL_ID, Conn, by_key

__all__ = ["BACKFILL_BATCH", "backfill", "or_tsquery", "search_turns", "turns_at"]

BACKFILL_BATCH = 2000
"""Turns indexed per transaction by ``backfill``."""

UNINDEXED = "SELECT channel_id, seq, text FROM turns WHERE terms IS NULL LIMIT $1"
SET_TERMS = (
    "UPDATE turns t SET terms = to_tsvector('simple', u.terms) "
    "FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS u(channel_id, seq, terms) "
    "WHERE t.channel_id = u.channel_id AND t.seq = u.seq AND t.terms IS NULL"
)
TERM_STATS = (
    "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples "
    "FROM pg_stats s JOIN pg_namespace n ON n.nspname = s.schemaname "
    "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename "
    "WHERE s.schemaname = current_schema() AND s.tablename = 'turns' AND s.attname = 'terms'"
)
TERMS_PRESENT = (
    "SELECT q.term FROM unnest($1::text[], $2::text[]) AS q(term, tsq) "
    "WHERE EXISTS (SELECT 1 FROM turns WHERE terms @@ to_tsquery('simple', q.tsq))"
)
SEARCH_TURNS = (
    f"SELECT {TURN_COLS} FROM turns, to_tsquery('simple', $3) q "
    "WHERE channel_id = $1 AND seq < $2 AND terms @@ q "
    "ORDER BY ts_rank(terms, q) DESC, seq DESC LIMIT $4"
)
TURNS_AT = (
    f"SELECT {TURN_COLS} FROM turns WHERE channel_id = $1 AND seq = ANY($2::bigint[]) "
    "ORDER BY seq"
)


def quoted(term: str) -> str:
    """One term as a tsquery operand: quoted, so it is never an operator."""
    return "'" + term.replace("'", "''").replace("\\", "") + "'"


def or_tsquery(query: Sequence[str]) -> str:
    """``'a' | 'b'``: a tsquery matching any of the terms."""
    return " | ".join(quoted(t) for t in query)


async def backfill(conn: Conn) -> int:
    """Index the turns stored without ``terms`` (before schema step 4, or by an older
    replica), one short transaction per batch; return how many."""
    done = 0
    while rows := await conn.fetch(UNINDEXED, BACKFILL_BATCH):
        cids, seqs, texts = zip(*((r[0], r[1], turn_terms(r[2])) for r in rows), strict=True)
        async with conn.transaction():
            status = await conn.execute(SET_TERMS, list(cids), list(seqs), list(texts))
        changed = int(status.rsplit(" ", 1)[-1])
        if changed == 0:  # someone else is indexing the same rows: let them
            break
        done += changed
    return done


async def _docs(conn: Conn, query: Sequence[str]) -> dict[str, int]:
    """term -> estimated number of turns holding it; terms that occur nowhere are left out."""
    present = await conn.fetch(TERMS_PRESENT, list(query), [quoted(t) for t in query])
    docs = {r[0]: 1 for r in present}
    stats = await conn.fetchrow(TERM_STATS)
    if stats is not None and stats[0] is not None:
        total = max(float(stats[2]), 0.0)
        # most_common_elem_freqs ends with min, max and null-fraction entries: zip stops first
        for term, freq in zip(stats[0], stats[1], strict=False):
            if term in docs:
                docs[term] = max(1, round(freq * total))
    return docs


async def search_turns(
    conn: Conn, key: ChannelKey, query: Sequence[str], before_seq: int, limit: int
) -> list[Turn]:
    """``ts_rank`` over this channel's turns before ``before_seq``; ties: newer first."""
    if not query or limit <= 0 or before_seq <= 1:
        return []
    cid = await conn.fetchval(CHANNEL_ID, *by_key(key))
    if cid is None:
        return []
    picked = pick_turn_terms(query, await _docs(conn, query))
    if not picked:
        return []
    rows = await conn.fetch(SEARCH_TURNS, cid, before_seq, or_tsquery(picked), limit)
    return [TurnRow(*r).turn(key) for r in rows]


async def turns_at(conn: Conn, key: ChannelKey, seqs: Sequence[int]) -> list[Turn]:
    """The channel's stored turns with these seqs, ascending; unknown seqs are skipped."""
    wanted = turn_seqs(seqs)
    cid = await conn.fetchval(CHANNEL_ID, *by_key(key)) if wanted else None
    if cid is None:
        return []
    return [TurnRow(*r).turn(key) for r in await conn.fetch(TURNS_AT, cid, wanted)]
