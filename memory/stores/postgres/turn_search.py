"""``PostgresStore``'s search over every stored turn: ``ts_rank`` over the GIN index of
``turns.terms`` (schema step 4).

``terms`` is ``to_tsvector('gistbot_stem', common.turn_terms(text))``, written in the
statement that stores or edits the turn, so the index is in step with the turns in every
transaction. ``gistbot_stem`` (schema step 12) is ``simple`` with English words stemmed by
Snowball and no stop words, so "cooked" finds "cooking" as on SQLite (FTS5's ``porter``);
CJK bigrams and other non-ASCII terms are left as they are.

A query uses the rule of the SQLite store (``common.pick_turn_terms``): only terms that
occur, the rarest first, none in more than ``COMMON_TURN_DOCS`` of the channel's turns.
Each term's count is taken on the GIN index for this channel and ``seq < before_seq``, up
to that bound (a ``LIMIT``), so a common term costs at most the bound; a term the planner's
statistics (``pg_stats.most_common_elems``, kept by ANALYZE) already show to be more
common than the bound is not counted at all.
What the telling terms leave of the limit is filled in the passes of
``common.turn_tiers``, as on SQLite (``SEARCH_BY``: best by ``ts_rank``, shortest by the
stored token count, or newest first). A "best" ranking puts people's messages before the
bot's own replies, as on SQLite.
Rows stored before step 4 are indexed by ``backfill`` at open, in batches.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory.models import ChannelKey, Turn
from memory.stores import common
from memory.stores.common import (
    TURN_COLS,
    TurnRow,
    merge_turn_tiers,
    pick_turn_terms,
    turn_seqs,
    turn_terms,
    turn_tiers,
)
from memory.stores.postgres.queries import CHANNEL_ID, Conn, by_key

__all__ = ["BACKFILL_BATCH", "backfill", "or_tsquery", "search_turns", "turns_at"]

BACKFILL_BATCH = 2000
"""Turns indexed per transaction by ``backfill``."""

UNINDEXED = (
    "SELECT channel_id, seq, text, author_name FROM turns WHERE terms IS NULL LIMIT $1"
)
SET_TERMS = (
    "UPDATE turns t SET terms = to_tsvector('gistbot_stem', u.terms) "
    "FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS u(channel_id, seq, terms) "
    "WHERE t.channel_id = u.channel_id AND t.seq = u.seq AND t.terms IS NULL"
)
TERM_STATS = (
    "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples "
    "FROM pg_stats s JOIN pg_namespace n ON n.nspname = s.schemaname "
    "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename "
    "WHERE s.schemaname = current_schema() AND s.tablename = 'turns' AND s.attname = 'terms'"
)
# How many of the channel's turns before a seq hold each term, counted up to a cap ($5).
TERM_COUNTS = (
    "SELECT q.term, (SELECT count(*) FROM (SELECT 1 FROM turns WHERE channel_id = $1 "
    "AND seq < $2 AND terms @@ to_tsquery('gistbot_stem', q.tsq) LIMIT $5) x) "
    "FROM unnest($3::text[], $4::text[]) AS q(term, tsq)"
)
SEARCH_TURNS = (
    f"SELECT {TURN_COLS} FROM turns, to_tsquery('gistbot_stem', $3) q "
    "WHERE channel_id = $1 AND seq < $2 AND terms @@ q "
    "ORDER BY role = 'assistant', ts_rank(terms, q) DESC, seq DESC LIMIT $4"
)
# The passes of ``common.turn_tiers`` after the first, by their order.
SEARCH_BY = {
    order: f"SELECT {TURN_COLS} FROM turns, to_tsquery('gistbot_stem', $3) q "
    f"WHERE channel_id = $1 AND seq < $2 AND terms @@ q ORDER BY {by}, seq DESC LIMIT $4"
    for order, by in (("best", "role = 'assistant', ts_rank(terms, q) DESC"),
                      ("shortest", "tokens"),
                      ("newest", "seq DESC"))
}
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
        cids, seqs, texts = zip(
            *((r[0], r[1], turn_terms(r[2], r[3])) for r in rows), strict=True
        )
        async with conn.transaction():
            status = await conn.execute(SET_TERMS, list(cids), list(seqs), list(texts))
        changed = int(status.rsplit(" ", 1)[-1])
        if changed == 0:  # someone else is indexing the same rows: let them
            break
        done += changed
    return done


async def _docs(conn: Conn, cid: int, before_seq: int, query: Sequence[str],
                max_docs: int | None = None) -> dict[str, int]:
    """term -> how many of the channel's turns before ``before_seq`` hold it, counted up to
    ``COMMON_TURN_DOCS + 1`` (``common.bound_docs`` with ``max_docs``); a term the column's
    statistics already know to be more common is not counted (that would read up to the cap
    of rows for nothing)."""
    cap = common.COMMON_TURN_DOCS + 1
    stats = await conn.fetchrow(TERM_STATS)
    known: dict[str, float] = {}
    if stats is not None and stats[0] is not None:
        total = max(float(stats[2]), 0.0)
        # most_common_elem_freqs ends with min, max and null-fraction entries: zip stops first
        known = {t: f * total for t, f in zip(stats[0], stats[1], strict=False)}
    docs = {t: cap for t in query if known.get(t, 0.0) >= cap}
    rest = [t for t in dict.fromkeys(query) if t not in docs]
    if rest:
        rows = await conn.fetch(TERM_COUNTS, cid, before_seq, rest, [quoted(t) for t in rest],
                                cap)
        docs.update({r[0]: common.bound_docs(int(r[1]), max_docs) for r in rows})
    return docs


async def search_turns(
    conn: Conn, key: ChannelKey, query: Sequence[str], before_seq: int, limit: int,
    fallback: Sequence[str] | None = None, max_docs: int | None = None,
) -> list[Turn]:
    """``ts_rank`` over this channel's turns before ``before_seq``; ties: newer first. The
    turns matching the query's telling terms come first, then the passes of
    ``common.turn_tiers`` over ``fallback`` fill the rest of ``limit`` (the SQLite
    store's rule); ``max_docs`` leaves out terms held by more turns."""
    if not query or limit <= 0 or before_seq <= 1:
        return []
    cid = await conn.fetchval(CHANNEL_ID, *by_key(key))
    if cid is None:
        return []
    docs = await _docs(conn, int(cid), before_seq, query, max_docs)
    # seqs start at 1, so ``before_seq - 1`` bounds how many turns the search covers
    first = pick_turn_terms(query, docs, before_seq - 1)
    rows = list(await conn.fetch(SEARCH_TURNS, cid, before_seq, or_tsquery(first), limit)
                ) if first else []
    if len(rows) < limit:  # the common words are counted only when they are needed
        if unseen := [t for t in dict.fromkeys(fallback or ()) if t not in docs]:
            docs.update(await _docs(conn, int(cid), before_seq, unseen, max_docs))
        for tier in turn_tiers(first, query, fallback, docs, before_seq - 1):
            more = await conn.fetch(SEARCH_BY[tier.order], cid, before_seq,
                                    or_tsquery(tier.terms), limit + len(rows))
            by_seq = {int(r[0]): r for r in [*more, *rows]}
            seqs = merge_turn_tiers([int(r[0]) for r in rows], (int(r[0]) for r in more),
                                    limit)
            rows = [by_seq[s] for s in seqs]
            if len(rows) >= limit:
                break
    return [TurnRow(*r).turn(key) for r in rows]


async def turns_at(conn: Conn, key: ChannelKey, seqs: Sequence[int]) -> list[Turn]:
    """The channel's stored turns with these seqs, ascending; unknown seqs are skipped."""
    wanted = turn_seqs(seqs)
    cid = await conn.fetchval(CHANNEL_ID, *by_key(key)) if wanted else None
    if cid is None:
        return []
    return [TurnRow(*r).turn(key) for r in await conn.fetch(TURNS_AT, cid, wanted)]
