"""``SqliteStore``'s archive SQL: episodes and long-term facts, each with an FTS5 index
whose rowid is the row's id and whose ``chan`` column holds ``c<channel id>``, so a search
is ANDed with its channel inside FTS5 and never ranks another channel's rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from memory.models import ChannelKey, Episode, LongTermFact, NewEpisode, NewLongTermFact, Recall
from memory.stores.common import (
    CHANNEL_FACT_COLS,
    ArchiveCopy,
    EpisodeRow,
    LongTermFactRow,
    channel_token,
    columns,
    episode_terms,
    fact_terms,
    stored_fact,
)
from memory.stores.sqlite.archive_vocab import ArchiveVocab
from memory.stores.sqlite.writer import WriteTx

__all__ = [
    "COMMON_TERM_DOCS",
    "RAREST_TERMS",
    "add_fact",
    "channel_of",
    "delete_fact",
    "episodes",
    "insert_channel_fact",
    "insert_episode",
    "list_facts",
    "replace_archive",
    "search",
]

RAREST_TERMS = 4
"""Most query terms one archive search uses, the rarest first (see ``_rarest``)."""
COMMON_TERM_DOCS = 500
"""A term in more archived items than this is too common to tell them apart; a query made
only of such terms recalls nothing rather than scoring most of the archive."""

_EPISODE_COLS = columns(EpisodeRow._fields, "e.")
_FACT_COLS = columns(LongTermFactRow._fields, "f.")


def _episode(key: ChannelKey, row: Sequence[Any]) -> Episode:
    stored = EpisodeRow(*row)  # speakers are stored as a JSON list
    return stored._replace(speakers=json.loads(str(stored.speakers))).episode(key)


def _channel_fact(key: ChannelKey, row: Sequence[Any]) -> LongTermFact:
    stored = LongTermFactRow(*row)  # source seqs are stored as "1,2,3"
    seqs = tuple(int(x) for x in str(stored.source_seqs).split(",") if x)
    return stored._replace(source_seqs=seqs).channel_fact(key)


def channel_of(conn: sqlite3.Connection, key: ChannelKey) -> int | None:
    """The channel's row id on a read connection; None for an unknown channel."""
    row = conn.execute(
        "SELECT id FROM channels WHERE platform = ? AND workspace = ? AND channel = ?",
        (key.platform, key.workspace, key.channel),
    ).fetchone()
    return None if row is None else int(row[0])


# ---------------------------------------------------------------------------- writes


def insert_episode(conn: sqlite3.Connection, cid: int, e: NewEpisode) -> int:
    """Archive one episode of channel ``cid`` and index it; return its id."""
    (eid,) = conn.execute(
        "INSERT INTO episodes (channel_id, first_seq, last_seq, started_at, ended_at, "
        "speakers, text) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (cid, e.first_seq, e.last_seq, e.started_at, e.ended_at, json.dumps(e.speakers), e.text),
    ).fetchone()
    conn.execute(
        "INSERT INTO episodes_fts (rowid, chan, terms) VALUES (?, ?, ?)",
        (eid, channel_token(cid), episode_terms(e)),
    )
    return int(eid)


def insert_channel_fact(conn: sqlite3.Connection, cid: int, f: NewLongTermFact, now: float) -> int:
    """Store one long-term fact of channel ``cid``, index it, mark what it supersedes."""
    (fid,) = conn.execute(
        "INSERT INTO memory_facts (channel_id, text, source_seqs, author, pinned, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (cid, f.text, ",".join(map(str, f.source_seqs)), f.author, int(f.pinned), now),
    ).fetchone()
    conn.execute(
        "INSERT INTO memory_facts_fts (rowid, chan, terms) VALUES (?, ?, ?)",
        (fid, channel_token(cid), fact_terms(f)),
    )
    if f.supersedes is not None:  # only a fact of the same channel, and only once
        conn.execute(
            "UPDATE memory_facts SET superseded_by = ? WHERE id = ? AND channel_id = ? "
            "AND superseded_by IS NULL",
            (fid, f.supersedes, cid),
        )
    return int(fid)


def add_fact(tx: WriteTx, key: ChannelKey, fact: NewLongTermFact, now: float) -> LongTermFact:
    """Store one fact (``/remember``); creates the channel if needed."""
    fid = insert_channel_fact(tx.conn, tx.new_channel_id(key), fact, now)
    return stored_fact(key, fid, fact, now)


def delete_fact(tx: WriteTx, key: ChannelKey, fact_id: int) -> LongTermFact | None:
    """Delete one fact of this channel and its index entry; None if there is no such fact."""
    cid = tx.channel_id(key, create=False)
    if cid is None:
        return None
    row = tx.conn.execute(
        f"DELETE FROM memory_facts WHERE id = ? AND channel_id = ? RETURNING {CHANNEL_FACT_COLS}",
        (fact_id, cid),
    ).fetchone()
    if row is None:
        return None
    tx.conn.execute("DELETE FROM memory_facts_fts WHERE rowid = ?", (fact_id,))
    return _channel_fact(key, row)


def replace_archive(
    tx: WriteTx, key: ChannelKey, episodes: Sequence[Episode], facts: Sequence[LongTermFact]
) -> None:
    """Set the channel's episodes and facts to copies (see ``common.ArchiveCopy``)."""
    conn, cid, plan = tx.conn, tx.new_channel_id(key), ArchiveCopy.of(episodes, facts)
    for table in ("episodes", "memory_facts"):
        conn.execute(
            f"DELETE FROM {table}_fts WHERE rowid IN "
            f"(SELECT id FROM {table} WHERE channel_id = ?)",
            (cid,),
        )
        conn.execute(f"DELETE FROM {table} WHERE channel_id = ?", (cid,))
    for episode in plan.episodes:
        insert_episode(conn, cid, episode)
    copied = {c.source_id: insert_channel_fact(conn, cid, c.fact, c.created_at) for c in plan.facts}
    for newer, older in plan.supersede(copied):
        conn.execute("UPDATE memory_facts SET superseded_by = ? WHERE id = ?", (newer, older))


# ---------------------------------------------------------------------------- reads


def list_facts(
    conn: sqlite3.Connection, key: ChannelKey, include_superseded: bool, limit: int
) -> list[LongTermFact]:
    """The channel's facts, newest first."""
    cid = channel_of(conn, key)
    if cid is None:
        return []
    rows = conn.execute(
        f"SELECT {_FACT_COLS} FROM memory_facts f WHERE channel_id = ? "
        f"{'' if include_superseded else 'AND superseded_by IS NULL '}"
        "ORDER BY id DESC LIMIT ?",
        (cid, limit),
    ).fetchall()
    return [_channel_fact(key, r) for r in rows]


def episodes(conn: sqlite3.Connection, key: ChannelKey, limit: int) -> list[Episode]:
    """The channel's newest episodes, newest first."""
    cid = channel_of(conn, key)
    if cid is None:
        return []
    rows = conn.execute(
        f"SELECT {_EPISODE_COLS} FROM episodes e WHERE channel_id = ? ORDER BY id DESC LIMIT ?",
        (cid, limit),
    ).fetchall()
    return [_episode(key, r) for r in rows]


def _rarest(conn: sqlite3.Connection, vocab: str, query: Sequence[str],
            kept: ArchiveVocab) -> list[str]:
    """The query's ``RAREST_TERMS`` rarest terms that occur in the index, common ones left out.

    Rare terms carry the meaning ("ORD-1042", "deadline"); common ones match most rows and
    would make BM25 score much of the archive. Counts are over all channels, which ranks
    terms well enough and keeps this a handful of index lookups (``kept``: remembered until
    the archive is written, ``archive_vocab``).
    """
    counts = kept.counts(conn, vocab, query)
    useful = [t for t in query if 0 < counts.get(t, 0) <= COMMON_TERM_DOCS]
    return sorted(useful, key=lambda t: counts[t])[:RAREST_TERMS]


def _fts_query(cid: int, query: Sequence[str]) -> str:
    """``chan:c<id> AND terms:("a" OR "b")``; terms are quoted, so none is an operator."""
    quoted = " OR ".join('"' + t.replace('"', '""') + '"' for t in query)
    return f"chan:{channel_token(cid)} AND terms:({quoted})"


def search(
    conn: sqlite3.Connection, key: ChannelKey, query: Sequence[str], facts_limit: int,
    episodes_limit: int, include_superseded: bool, kept: ArchiveVocab,
) -> Recall:
    """FTS5 BM25 over this channel's facts and episodes, rarest query terms only."""
    cid = channel_of(conn, key)
    if cid is None:
        return Recall()
    rare_fact_terms = _rarest(conn, "memory_facts_vocab", query, kept)
    rare_episode_terms = _rarest(conn, "episodes_vocab", query, kept)
    # bm25 weights: 0 for the channel column, so only the terms rank.
    facts = [] if not rare_fact_terms else conn.execute(
        f"SELECT {_FACT_COLS} FROM memory_facts_fts "
        "JOIN memory_facts f ON f.id = memory_facts_fts.rowid "
        "WHERE memory_facts_fts MATCH ? AND f.channel_id = ? "
        f"{'' if include_superseded else 'AND f.superseded_by IS NULL '}"
        "ORDER BY f.superseded_by IS NOT NULL, bm25(memory_facts_fts, 0.0, 1.0), "
        "f.id DESC LIMIT ?",
        (_fts_query(cid, rare_fact_terms), cid, facts_limit),
    ).fetchall()
    found = [] if not rare_episode_terms else conn.execute(
        f"SELECT {_EPISODE_COLS} FROM episodes_fts "
        "JOIN episodes e ON e.id = episodes_fts.rowid "
        "WHERE episodes_fts MATCH ? AND e.channel_id = ? "
        "ORDER BY bm25(episodes_fts, 0.0, 1.0), e.id DESC LIMIT ?",
        (_fts_query(cid, rare_episode_terms), cid, episodes_limit),
    ).fetchall()
    return Recall(tuple(_channel_fact(key, r) for r in facts),
                  tuple(_episode(key, r) for r in found))
