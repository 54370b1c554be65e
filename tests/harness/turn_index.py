"""A brute-force check of SQLite's turn search index (``turns_fts``) against ``turns``,
shared by the store and crash-safety tests."""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict

from memory.stores.common import turn_terms
from memory.stores.sqlite.turn_search import SEQ_BITS

__all__ = ["assert_turn_index_matches_turns"]


def assert_turn_index_matches_turns(conn: sqlite3.Connection) -> int:
    """Fail unless ``turns_fts`` indexes exactly the terms of the stored turns: FTS5's own
    integrity check passes, every term's document and instance counts equal a scan of
    ``turns``, and every term matches exactly the turns that hold it (a stale entry of a
    deleted or edited turn, or a missing one, changes them). Returns how many turns were
    checked."""
    # the writer indexes its batch's new turns before each COMMIT: nothing stays queued
    assert conn.execute("SELECT count(*) FROM turns_unindexed").fetchone() == (0,)
    conn.execute("INSERT INTO turns_fts (turns_fts) VALUES ('integrity-check')")
    docs: Counter[str] = Counter()
    instances: Counter[str] = Counter()
    holders: dict[str, set[int]] = defaultdict(set)
    said: dict[str, str] = {}  # a word as written that stems to each indexed term
    rows = conn.execute("SELECT channel_id, seq, text, author_name FROM turns").fetchall()
    stem = _stemmer(conn, {w for _, _, text, author in rows for w in
                           turn_terms(text, author).split()})
    n = 0
    for cid, seq, text, author in rows:
        words = [stem[w] for w in turn_terms(text, author).split()]
        for word in turn_terms(text, author).split():
            said.setdefault(stem[word], word)
        instances.update(words)
        docs.update(set(words))
        for word in words:
            holders[word].add((cid << SEQ_BITS) | seq)
        n += 1
    indexed = {term: (doc, cnt) for term, doc, cnt in
               conn.execute("SELECT term, doc, cnt FROM turns_vocab")}
    expected = {term: (docs[term], instances[term]) for term in docs}
    assert indexed == expected, sorted(set(indexed.items()) ^ set(expected.items()))[:10]
    # turns_fts keeps no per-row table to count (columnsize = 0): ask it term by term
    for term, rowids in holders.items():
        quoted = '"' + said[term].replace('"', '""') + '"'  # a query is stemmed too
        found = {r for (r,) in conn.execute(
            "SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?", (quoted,))}
        assert found == rowids, (term, sorted(found ^ rowids)[:10])
    return n


def _stemmer(conn: sqlite3.Connection, words: set[str]) -> dict[str, str]:
    """word -> the term ``turns_fts``'s tokenizer makes of it (FTS5's ``porter``), read
    from a temporary FTS5 table with the same tokenizer."""
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'turns_fts'").fetchone()
    tokenize = sql[sql.index("tokenize"):].split("=", 1)[1].strip().rstrip(")").strip()
    conn.execute(f"CREATE VIRTUAL TABLE temp.stems USING fts5 (w, tokenize = {tokenize})")
    conn.execute("CREATE VIRTUAL TABLE temp.stems_v USING fts5vocab (temp, stems, 'instance')")
    try:
        ordered = sorted(words)
        conn.executemany("INSERT INTO temp.stems (rowid, w) VALUES (?, ?)",
                         list(enumerate(ordered, 1)))
        out = {ordered[doc - 1]: term
               for term, doc in conn.execute("SELECT term, doc FROM temp.stems_v")}
    finally:
        conn.execute("DROP TABLE temp.stems_v")
        conn.execute("DROP TABLE temp.stems")
    assert len(out) == len(words)
    return out
