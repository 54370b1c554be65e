"""The term selection and indexed form both stores share for turn search
(``memory.stores.common``): pure logic, no database."""

from __future__ import annotations

import pytest

from memory.search_text import term_set, terms
from memory.stores.common import (
    COMMON_TURN_DOCS,
    TURN_QUERY_TERMS,
    TURN_TERMS_CHARS,
    pick_turn_terms,
    turn_seqs,
    turn_terms,
)


def test_rarest_terms_that_occur_first_common_ones_left_out() -> None:
    docs = {"ord": 900, "7731": 1, "refund": 12, "the": COMMON_TURN_DOCS + 1, "late": 12}
    query = ["the", "refund", "missing", "ord", "late", "7731"]
    assert pick_turn_terms(query, docs) == ["7731", "refund", "late", "ord"]
    assert pick_turn_terms(["the", "missing"], docs) == []
    assert pick_turn_terms([], docs) == []


def test_at_most_the_rarest_few_terms_and_no_duplicates() -> None:
    query = [f"t{i}" for i in range(20)] * 2
    docs = {f"t{i}": 100 - i for i in range(20)}
    picked = pick_turn_terms(query, docs)
    assert picked == [f"t{i}" for i in range(19, 19 - TURN_QUERY_TERMS, -1)]


def test_indexed_form_is_the_search_terms_cut_at_a_word() -> None:
    assert turn_terms("Order ORD-7731, 마감은 금요일") == terms("Order ORD-7731, 마감은 금요일")
    long = turn_terms("word " * 50_000)
    assert len(long) <= TURN_TERMS_CHARS and long.endswith("word") and "  " not in long


def test_turn_seqs_are_distinct_positive_and_ascending() -> None:
    assert turn_seqs([5, 3, 3, 0, -1, 9]) == [3, 5, 9]


@pytest.mark.parametrize("text", [
    "Order ORD-7731 shipped_late, re-sent 2x!", "it's   the café's bill", "마감은 금요일",
    "締切日は明日", "mixed 마감 and ASCII", "", "   ", "x_y__z 123abc ABC123",
])
def test_the_term_set_is_the_set_of_the_terms(text: str) -> None:
    # The ranking's shortcut for ASCII texts (docs/decisions/0055) must find exactly the
    # terms ``terms`` finds, or the specific list would weigh words the index never holds.
    assert term_set(text) == frozenset(terms(text).split())
