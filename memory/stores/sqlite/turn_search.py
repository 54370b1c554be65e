"""``SqliteStore``'s search over every stored turn: FTS5 BM25 on ``turns_fts``.

The index (schema steps 5 and 11; why it is built so: docs/decisions/0004):

* **Contentless FTS5** without per-row sizes, rowid ``(channel_id << 32) | seq``, so "this
  channel's turns before ``before_seq``" is one rowid range. It indexes the terms of
  ``memory.search_text``, not the stored text. ``bm25()`` then takes every turn as equally
  long, so a "best" pass ranks ``RERANK`` times its limit and re-orders them by length,
  people's messages before the bot's replies. Terms are stemmed (``porter``, step 15).
* **Kept by triggers on ``turns``** inside each writing transaction, so a crash leaves both
  or neither. They call ``gistbot_terms(author_name, text)`` (``register``), which every
  connection of the store registers; a tool writing ``turns`` outside gistbot must too.
  A contentless table forgets a row when given its indexed values again, so the tokens of
  ``gistbot_terms`` must never change without a migration that rebuilds ``turns_fts``.
* **New and edited turns are queued** (``turns_unindexed``) and indexed by ``drain`` once
  per writer batch, before its COMMIT: one FTS5 segment per batch, not per turn.

A query uses only the rarer terms that occur (``common.pick_turn_terms``), counted in the
channel's rowid range up to ``COMMON_DOCS + 1``; what they leave of the limit is filled by
the passes of ``common.turn_tiers``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memory.models import ChannelKey, Turn
from memory.stores import common
from memory.stores.common import (
    TURN_COLS,
    TURN_TERMS_CHARS,
    TierOrder,
    TurnRow,
    columns,
    merge_turn_tiers,
    pick_turn_terms,
    turn_seqs,
    turn_terms,
    turn_tiers,
)
from memory.stores.sqlite.archive import channel_of
from memory.stores.sqlite.term_counts import TermCounts

__all__ = ["SEQ_BITS", "drain", "indexed_text", "register", "search_turns", "turns_at"]

SEQ_BITS = 32
"""Low bits of a ``turns_fts`` rowid that hold the seq (a channel stores < 2**32 turns)."""
_SEQ_MASK = (1 << SEQ_BITS) - 1


def indexed_text(author: str, text: str) -> str:
    """What ``gistbot_terms`` hands FTS5 for a turn: text that its ``unicode61`` tokenizer
    splits into exactly the terms of ``common.turn_terms(text, author)``, in order.

    For ASCII that is the speaker's name and the text themselves: ``unicode61`` takes runs
    of ASCII letters and digits and lower-cases them, which is what ``search_text.terms``
    does to ASCII, so the tokenizing happens in C, outside the GIL, instead of in Python
    (the Python terms were the largest single cost of indexing a turn). Everything else
    (CJK bigrams, case folding beyond ASCII, a text over ``TURN_TERMS_CHARS``) gets the
    Python terms. Deletes hand FTS5 the same value again, so an index written before this
    shortcut stays valid (the tests check the token streams are identical)."""
    raw = f"{author} {text}" if author else text
    if raw.isascii() and len(raw) <= TURN_TERMS_CHARS:
        return raw
    return turn_terms(text, author)


def register(conn: sqlite3.Connection) -> None:
    """Give ``conn`` ``gistbot_terms(author_name, text)``, which the ``turns`` triggers
    call: ``indexed_text``, whose tokens are ``common.turn_terms`` (the speaker's name is
    indexed with the text)."""
    conn.create_function("gistbot_terms", 2, indexed_text, deterministic=True)


def drain(conn: sqlite3.Connection) -> int:
    """Index the queued new and edited turns (in the caller's transaction); return how
    many."""
    if conn.execute("SELECT 1 FROM turns_unindexed LIMIT 1").fetchone() is None:
        return 0
    n = conn.execute(
        "INSERT INTO turns_fts (rowid, terms) SELECT u.id, gistbot_terms(t.author_name, t.text) "
        f"FROM turns_unindexed u JOIN turns t ON t.channel_id = u.id >> {SEQ_BITS} "
        f"AND t.seq = u.id & {_SEQ_MASK}"
    ).rowcount
    conn.execute("DELETE FROM turns_unindexed")
    return n


def _read(conn: sqlite3.Connection, key: ChannelKey, cid: int, seqs: Sequence[int]) -> list[Turn]:
    """The channel's turns with these seqs, by primary key, ascending."""
    out: list[Turn] = []
    for start in range(0, len(seqs), 500):  # stay under SQLite's parameter limit
        chunk = seqs[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT {TURN_COLS} FROM turns WHERE channel_id = ? AND seq IN ({marks}) "
            "ORDER BY seq",
            (cid, *chunk),
        ).fetchall()
        out += [TurnRow(*r).turn(key) for r in rows]
    return out


def turns_at(conn: sqlite3.Connection, key: ChannelKey, seqs: Sequence[int]) -> list[Turn]:
    """The channel's stored turns with these seqs, ascending; unknown seqs are skipped."""
    wanted = turn_seqs(seqs)
    cid = channel_of(conn, key) if wanted else None
    return [] if cid is None else _read(conn, key, cid, wanted)


_COUNT = (
    "SELECT count(*) FROM (SELECT rowid FROM turns_fts WHERE turns_fts MATCH ? "
    "AND rowid BETWEEN ? AND ? LIMIT ?)"
)


def _match(query: Sequence[str]) -> str:
    """``"a" OR "b"``: each term quoted, so none is read as an FTS5 operator."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in query)


_ORDER = {
    "best": "bm25(turns_fts), f.rowid DESC",
    "newest": "f.rowid DESC",
    "shortest": "t.tokens, f.rowid DESC",
}


COMMON_DOCS = 5_000
"""SQLite's ``common.COMMON_TURN_DOCS``: a term in more of the channel's turns than this is
left out of a turn search. Higher than PostgreSQL's (2,000): without per-row sizes FTS5
ranks a matching turn with one doclist read, so a higher bound finds more known items in a
very long channel at no more cost (docs/decisions/0004)."""
RERANK = 3
"""A "best" pass ranks this many times its limit by FTS5's ``bm25()`` (at most
``RERANK_EXTRA`` more than its limit), then keeps the best after normalizing by each
turn's length (``_by_length``)."""
RERANK_EXTRA = 450
"""Most rows a "best" pass weighs beyond its limit. A small search (a hop's 4, the
follow-up's 10, a stated value's 20) weighs ``RERANK`` times its limit; a reply's pool
of 450 weighs 900, not 1,350: each weighed row is read by primary key, ~5 microseconds
at 1,000,000 turns, and the turns ranked 900th to 1,350th by ``bm25()`` alone are rarely
among the 450 best by length (docs/decisions/0055)."""
_K1, _B = 1.2, 0.75  # FTS5's bm25() constants


def _by_length(rows: Sequence[tuple[int, float, int, int]], limit: int) -> list[int]:
    """Rowids of ``(rowid, bm25, tokens, bot)`` rows in BM25 order with length
    normalization, people's messages before the bot's replies (``bot`` is 1 for those:
    a reply restates what people said, and a weak model's replies repeat the same words).

    Without per-row sizes (``columnsize = 0``) FTS5's ``bm25()`` takes every turn's length
    as -1: a term found once scores the same in a 3-word turn and a 60-word one. For a term
    found once in a turn (nearly always, in chat) BM25's term weight is
    ``idf * (k1 + 1) / (1 + k1 * (1 - b + b * len / avglen))``; FTS5's score is that with
    one constant length, so dividing it by ``1 + k1 * (1 - b + b * len / avglen)`` restores
    the order by length. ``len`` is the turn's stored token count and ``avglen`` the mean
    of the candidates'."""
    if not rows:
        return []
    avg = max(1.0, sum(r[2] for r in rows) / len(rows))
    ranked = sorted(rows, key=lambda r: (r[3], r[1] / (1 + _K1 * (1 - _B + _B * r[2] / avg)),
                                         -r[0]))
    return [r[0] for r in ranked[:limit]]


_TURN_COLS_T = columns(TurnRow._fields, "t.")


def _ranked(conn: sqlite3.Connection, terms: Sequence[str], low: int, high: int,
            limit: int, order: TierOrder = "best", read: dict[int, TurnRow] | None = None
            ) -> list[int]:
    """Rowids matching any of ``terms`` in ``[low, high]``, in ``order`` (ties: newer).

    A "best" pass reads each candidate's row to weigh its length anyway, so it reads the
    whole row then and puts the kept ones in ``read`` (rowid -> row): ``search_turns``
    does not look them up again (at 1,000,000 turns a lookup by primary key costs ~5
    microseconds, and a search kept 450 of them; docs/decisions/0055)."""
    if not terms or limit <= 0:
        return []
    if order == "best" and RERANK > 1:
        rows = conn.execute(
            f"SELECT c.rowid, c.score, t.tokens, t.role = 'assistant', {_TURN_COLS_T} FROM "
            "(SELECT f.rowid, bm25(turns_fts) AS score "
            "FROM turns_fts f WHERE turns_fts MATCH ? AND f.rowid BETWEEN ? AND ? "
            "ORDER BY score, f.rowid DESC LIMIT ?) c "
            f"JOIN turns t ON t.channel_id = {low >> SEQ_BITS} AND t.seq = c.rowid & {_SEQ_MASK}",
            (_match(terms), low, high, min(limit * RERANK, limit + RERANK_EXTRA)),
        ).fetchall()
        kept = _by_length(rows, limit)
        if read is not None:
            wanted = set(kept)
            read.update((r[0], TurnRow(*r[4:])) for r in rows if r[0] in wanted)
        return kept
    join = (f"JOIN turns t ON t.channel_id = {low >> SEQ_BITS} "
            f"AND t.seq = f.rowid & {_SEQ_MASK} ") if order == "shortest" else ""
    return [r for (r,) in conn.execute(
        f"SELECT f.rowid FROM turns_fts f {join}WHERE turns_fts MATCH ? "
        f"AND f.rowid BETWEEN ? AND ? ORDER BY {_ORDER[order]} LIMIT ?",
        (_match(terms), low, high, limit),
    )]


def search_turns(
    conn: sqlite3.Connection,
    key: ChannelKey,
    query: Sequence[str],
    before_seq: int,
    limit: int,
    fallback: Sequence[str] | None = None,
    counts: TermCounts | None = None,
    max_docs: int | None = None,
) -> list[Turn]:
    """BM25 over this channel's turns before ``before_seq``; ties: newer first. The turns
    matching the query's telling terms come first, then the passes of
    ``common.turn_tiers`` over ``fallback`` fill the rest of ``limit``. ``counts`` keeps
    common terms' counts between searches (``term_counts``); ``max_docs`` leaves out terms
    held by more turns (``common.bound_docs``)."""
    cid = channel_of(conn, key)
    if cid is None or not query or limit <= 0 or before_seq <= 1:
        return []
    low = cid << SEQ_BITS
    high = low | min(before_seq - 1, _SEQ_MASK)
    # How many of these turns hold each term, counted only up to the bound: reading a
    # common term's whole doclist (as turns_vocab would) costs more than the search.
    bound = COMMON_DOCS
    cap = bound + 1
    docs: dict[str, int] = {}

    def exact(term: str) -> int:
        return int(conn.execute(_COUNT, (_match([term]), low, high, cap)).fetchone()[0])

    def count(terms: Sequence[str]) -> None:
        for t in dict.fromkeys(terms):
            if t not in docs:
                n = exact(t) if counts is None else counts.get(cid, cap, t, before_seq - 1, exact)
                docs[t] = common.bound_docs(n, max_docs, bound)

    count(query)
    # seqs start at 1, so ``before_seq - 1`` bounds how many turns the search covers
    first = pick_turn_terms(query, docs, before_seq - 1, bound)
    read: dict[int, TurnRow] = {}
    rowids = _ranked(conn, first, low, high, limit, read=read)
    if len(rowids) < limit:  # the common words are counted only when they are needed
        count(fallback or ())
        for tier in turn_tiers(first, query, fallback, docs, before_seq - 1, bound):
            more = _ranked(conn, tier.terms, low, high, limit + len(rowids), tier.order, read)
            rowids = merge_turn_tiers(rowids, more, limit)
            if len(rowids) >= limit:
                break
    return _turns(conn, key, cid, rowids, read)


def _turns(conn: sqlite3.Connection, key: ChannelKey, cid: int, rowids: Sequence[int],
           read: dict[int, TurnRow]) -> list[Turn]:
    """The turns of ``rowids``, in that order: from the rows a "best" pass read already
    (``read``), the others by primary key."""
    found = {read[r].seq: read[r].turn(key) for r in rowids if r in read}
    found.update((t.seq, t) for t in _read(conn, key, cid, sorted(
        r & _SEQ_MASK for r in rowids if r not in read)))
    return [found[r & _SEQ_MASK] for r in rowids if r & _SEQ_MASK in found]
