"""The fused order of recalled turns, adjusted for a small room: said-again turns last,
turns that name the same rare thing kept together.

``ranking.rank`` fuses the candidate lists into one order; the view then shows that order
while the room lasts. Two things the fusion cannot see (docs/decisions/0052):

* **Said again** — a text said two or more times among the candidates, word for word
  ("Aw.", "Love that for you.", "The heating at the office is stuck on tropical.") says
  nothing particular: a reaction or a refrain. It matched through its author's name or a
  common word, and being short it ranked high. ``said_again_last`` moves such turns after
  the others (people's before the bot's still): shown once each, they took an eighth of a
  ~2,000-token room.
* **Together** — a chain ("Delia is my sister" → "Delia got a rabbit" → "the rabbit is
  called Noodle" → "Noodle came from a breeder in Bergen") shares no word with the
  question past its first turn, and the rest rank far down. ``kept_together`` places,
  right after each of the ``SOURCES`` best people's turns, the candidates that share one
  of its rare words (no stopword) (held by at most ``RARE`` candidates, not a word of the question),
  ``PER_TURN`` a turn, and theirs after them, ``DEPTH`` steps deep.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import chain

from memory.models import Turn
from memory.search_text import STOP_OR_SHORT, cached_term_set, content_terms, query_terms

__all__ = ["DEPTH", "PER_TURN", "RARE", "SOURCES", "kept_together", "said_again_last"]

SOURCES = 3
"""Best people's turns whose rare words pull their chain up behind them."""
RARE = 3
"""A word held by more candidates than this leads nowhere particular."""
PER_TURN = 3
"""Turns placed behind one turn at most (rarest shared word first)."""
DEPTH = 3
"""Steps a chain is followed from its source."""


@lru_cache(maxsize=8192)
def _words(text: str) -> frozenset[str]:
    """``content_terms`` of ``text``; an ASCII text's from the terms the ranking found
    already (``cached_term_set``), in one set difference (docs/decisions/0056)."""
    if text.isascii():
        return cached_term_set(text) - STOP_OR_SHORT
    return frozenset(content_terms(text))


@lru_cache(maxsize=8192)
def _said(text: str) -> str:
    return " ".join(text.casefold().split())


def said_again_last(order: Sequence[Turn]) -> list[Turn]:
    """``order`` with people's turns whose text (case and spacing aside) two or more of
    ``order`` hold moved after the other people's turns, before the bot's replies; each
    group keeps its order."""
    said = Counter(_said(t.text) for t in order)
    people = [t for t in order if t.role != "assistant"]
    once = [t for t in people if said[_said(t.text)] < 2]
    again = [t for t in people if said[_said(t.text)] >= 2]
    return [*once, *again, *(t for t in order if t.role == "assistant")]


def kept_together(order: Sequence[Turn], question: str,
                  counts: Mapping[str, int] | None = None) -> list[Turn]:
    """``order`` (best first) with each of the ``SOURCES`` best people's turns followed by
    the candidates sharing a rare word with it, and so on ``DEPTH`` steps deep (see the
    module docstring); the rest keep their order. ``counts``: how many of ``order`` hold
    each term (any term, stopwords too), when the caller counted them already
    (``ranking.rank``): counting the words of ~450 candidates again costs ~0.4 ms a view."""
    words = [_words(t.text) for t in order]
    df = Counter(chain.from_iterable(words)) if counts is None else counts
    asked = set(query_terms(question, common=True))
    # Only the rare words are indexed (set intersections, not a Python loop per word).
    rare = {w for w, n in df.items() if 2 <= n <= RARE} - asked
    holders: dict[str, list[int]] = {}
    for i, held in enumerate(words):
        for w in held & rare:
            holders.setdefault(w, []).append(i)
    placed: set[int] = set()
    out: list[int] = []

    def put(i: int, depth: int) -> None:
        placed.add(i)
        out.append(i)
        if depth <= 0:
            return
        behind = 0
        for w in sorted(words[i] & holders.keys(), key=lambda w: (df[w], w)):
            for j in holders[w]:
                if behind < PER_TURN and j not in placed and order[j].role != "assistant":
                    behind += 1
                    put(j, depth - 1)

    sources = {i for i, t in enumerate(order) if t.role != "assistant"}
    sources = set(sorted(sources)[:SOURCES])
    for i in range(len(order)):
        if i not in placed:
            put(i, DEPTH if i in sources else 0)
    return [order[i] for i in out]
