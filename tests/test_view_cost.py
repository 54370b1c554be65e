"""The view's cheaper paths give what the slow ones gave (docs/decisions/0056, amended):
terms found in one C call, term sets and capitalised words remembered per text, the pool's
word counts shared by the ranking and ``together``."""

from __future__ import annotations

import random
import string
from collections import Counter
from itertools import chain

from memory import search_text
from memory.hops import name_terms
from memory.models import ChannelKey, Turn
from memory.ranking import Weights, rank
from memory.search_text import cached_term_set, content_terms, term_set
from memory.together import kept_together, said_again_last

KEY = ChannelKey("test", "w1", "viewcost")


def turn(seq: int, text: str, who: str = "Alice") -> Turn:
    return Turn(key=KEY, seq=seq, message_id=f"m{seq}", role="user", author_id=who.lower(),
                author_name=who, text=text, tokens=len(text.split()), sent_at=1e9 + seq * 60)


def _slow_terms(text: str) -> list[str]:
    """The CJK-aware path every text took before (``_mixed_tokens``)."""
    return list(search_text._mixed_tokens(text))


def _texts() -> list[str]:
    rng = random.Random(7)
    alphabet = string.printable + "ÄéΩß’—ﬁİǅ中文字가"
    words = ["The", "a", "I", "x", "Rabbit", "2", "42", "don’t", "snake_case", "Straße",
             "İstanbul", "ΣΑΣ", "퍼시가", "東京タワー", "e-mail"]
    out = ["Saw Percy and the Hollow Pines", "café — naïve’s", "퍼시가 왔어요 today", ""]
    for _ in range(3000):
        out.append(" ".join(rng.choice(words) for _ in range(5))
                   + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))))
    return out


def test_fast_terms_equal_the_cjk_aware_path() -> None:
    for text in _texts():
        slow = _slow_terms(text)
        assert list(search_text._tokens(text)) == slow, text
        assert term_set(text) == frozenset(slow), text
        assert content_terms(text) == {t for t in slow if t not in search_text._STOP and (
            len(t) >= 2 or search_text._IS_CJK.match(t))}, text


def test_an_edited_text_gets_its_own_terms_and_names() -> None:
    assert cached_term_set("we met Percy") == {"we", "met", "percy"}
    assert cached_term_set("we met Galway") == {"we", "met", "galway"}
    # the same turn (seq) edited: its names are read from the new text
    assert name_terms([turn(1, "Saw Percy there")], set()) == {"percy": 1}
    assert name_terms([turn(1, "Saw Galway there")], set()) == {"galway": 1}
    # the same text, the channel's names learnt since: asked anew, not remembered
    opening = [turn(2, "Percy went home.")]
    assert name_terms(opening, set()) == {}
    assert name_terms(opening, set(), lambda w: w == "percy") == {"percy": 2}


def test_kept_together_with_shared_counts_equals_its_own_count() -> None:
    order = [turn(1, "Delia is my sister"), turn(2, "the weather was grey"),
             turn(3, "Delia got a rabbit"), turn(4, "the rabbit is called Noodle"),
             turn(5, "Noodle came from a breeder in Bergen"), turn(6, "grey again today"),
             turn(7, "the weather in Bergen")]
    counts = Counter(chain.from_iterable(term_set(t.text) for t in order))
    for question in ("Where is Delia's rabbit from?", "weather"):
        alone = kept_together(order, question)
        assert kept_together(order, question, counts) == alone
    assert [t.seq for t in kept_together(order, "Delia")] == [1, 2, 6, 7, 5, 4, 3]  # moved


def test_rank_counts_anew_when_a_list_weighed_zero_leaves_turns_out() -> None:
    alice = [turn(10, "Delia got a pet called Noodle"), turn(15, "the weather was grey"),
             turn(25, "the weather was grey again"), turn(30, "Noodle came from Bergen")]
    bob = [turn(20, "Noodle soup for lunch", who="Bob"), turn(40, "Noodle bar", who="Bob")]
    hits = [alice[3], alice[1], alice[2], *bob, alice[0]]
    question = "What did Alice say about Delia?"
    asking = [turn(1000, question, who="Quinn")]
    # only the named speaker's list weighs: Bob's turns are candidates but not ranked
    only = Weights(lexical=0, window=0, specific=0, recency=0)
    got = rank(hits, asking, weights=only)
    plain = rank(hits, asking, weights=Weights(lexical=0, window=0, specific=0, recency=0,
                                               adjusted=False))
    assert [t.seq for t in plain] == [30, 15, 25, 10]
    assert got == kept_together(said_again_last(plain), question)
    assert [t.seq for t in got] == [30, 10, 15, 25]  # the chain on "noodle" kept
    # the pool's counts (Bob's turns too: "noodle" held by four) would not keep the chain
    pool = Counter(chain.from_iterable(term_set(t.text) for t in hits))
    assert got != kept_together(said_again_last(plain), question, pool)
