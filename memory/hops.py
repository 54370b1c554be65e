"""Multi-hop recall: search again with what the best matches say.

A question whose answer spans turns ("where does Rosalind's sister keep her boat?") shares
words with the first turn of the chain at most ("my sister Effie bought a boat"); the next
turns name what that one introduced ("Effie named it Maid of Kerry", "Maid of Kerry is
moored on Pudding Lane") and nothing of the question. ``hop_terms`` takes the words of the
best-ranked matches the question did not use; a search with them, bounded to words few
turns hold (names, places, things), finds the next turn of the chain, and a second hop from
those finds the one after (pseudo-relevance feedback, two rounds; docs/decisions/0037).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import zip_longest

from memory.models import Turn
from memory.search_text import MAX_QUERY_TERMS, query_terms

__all__ = ["HOPS", "HOP_DOCS", "HOP_FROM", "HOP_LIMIT", "after_sources", "hop_terms"]

HOPS = 2
"""Rounds of searching again: a chain of up to three steps beyond the first match."""
HOP_FROM = 3
"""Best matches (people's) whose words a round searches with, one search each."""
HOP_DOCS = 10
"""A word held by more of the searched turns than this does not lead anywhere particular
(the store leaves it out of the hop's search)."""
HOP_LIMIT = 4
"""Turns one source's search adds at most."""


def hop_terms(sources: Iterable[Turn], used: set[str]) -> list[str]:
    """The search terms of ``sources`` (best first) not in ``used``, taken in turn from
    each source (its first unused term, then each one's second …: one long message does
    not crowd out the others), at most ``MAX_QUERY_TERMS``; ``used`` gains them, so a later
    round does not search them again. People's messages only: a bot's reply restates them."""
    lists = [[w for w in query_terms(t.text) if w not in used]
             for t in sources if t.role != "assistant"]
    out: dict[str, None] = {}
    for column in zip_longest(*lists):
        for w in column:
            if w is not None and len(out) < MAX_QUERY_TERMS:
                out[w] = None
    used.update(out)
    return list(out)


def after_sources(hits: Sequence[Turn], led: Mapping[int, Sequence[Turn]]) -> list[Turn]:
    """``hits`` (the word-match order) with each turn a hop found placed right after the
    turn whose words found it (``led``: source seq -> found turns, in their order), and
    what those found after them in turn: the chain stays together near its first match,
    as the follow-up search places its matches."""
    out: dict[int, Turn] = {}

    def put(turn: Turn) -> None:
        if turn.seq in out:
            return
        out[turn.seq] = turn
        for nxt in led.get(turn.seq, ()):
            put(nxt)

    for hit in hits:
        put(hit)
    return list(out.values())
