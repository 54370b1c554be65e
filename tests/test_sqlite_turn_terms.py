"""What SQLite's turn index is handed (``turn_search.indexed_text``): whatever the text,
FTS5's tokenizer must see exactly the terms of ``common.turn_terms``, in order, or search
would differ from PostgreSQL's and a delete would not find what an insert indexed."""

from __future__ import annotations

import sqlite3

from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory.stores.common import TURN_TERMS_CHARS, turn_terms
from memory.stores.sqlite.turn_search import indexed_text

_TABLE = "CREATE VIRTUAL TABLE {0} USING fts5 (terms, content = '', " \
    "tokenize = 'unicode61 remove_diacritics 0')"


def _tokens(conn: sqlite3.Connection, table: str, value: str) -> list[str]:
    """The terms FTS5 indexes for ``value``, in position order (as the turns index does)."""
    conn.execute(f"INSERT INTO {table} ({table}) VALUES ('delete-all')")  # contentless
    conn.execute(f"INSERT INTO {table} (rowid, terms) VALUES (1, ?)", (value,))
    rows = conn.execute(f"SELECT term FROM {table}_v ORDER BY offset").fetchall()
    return [r[0] for r in rows]


def _conn() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(_TABLE.format("t"))
    conn.execute("CREATE VIRTUAL TABLE t_v USING fts5vocab (t, 'instance')")
    return conn


_CONN = _conn()

ascii_text = st.text(st.characters(max_codepoint=127), max_size=60)


@settings(max_examples=400, deadline=None)
@given(author=ascii_text | st.text(max_size=8), text=ascii_text | st.text(max_size=60))
@example(author="Min", text="Straße İstanbul ǅ ﬁne")  # casefold differs from FTS5's lower
@example(author="민지", text="프로젝트 마감은 금요일 ORD-7731")  # CJK bigrams
@example(author="", text="tab\tnul\x00under_score ORD-7731 v2.7.1 a@b.c")
@example(author="A", text="word " * (TURN_TERMS_CHARS // 5 + 10))  # cut at the bound
def test_fts5_indexes_exactly_the_turn_terms(author: str, text: str) -> None:
    assert _tokens(_CONN, "t", indexed_text(author, text)) == turn_terms(text, author).split()


def test_ascii_is_handed_over_as_written_and_the_rest_as_terms() -> None:
    assert indexed_text("Ann", "Order ORD-7731, please!") == "Ann Order ORD-7731, please!"
    assert indexed_text("", "hi") == "hi"
    assert indexed_text("Min", "Straße") == turn_terms("Straße", "Min") == "min strasse"
    long = "word " * (TURN_TERMS_CHARS // 5 + 10)
    assert indexed_text("A", long) == turn_terms(long, "A")
