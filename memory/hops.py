"""Multi-hop recall: search again with what the best matches say.

A question whose answer spans turns ("where does Rosalind's sister keep her boat?") shares
words with the first turn of the chain at most ("my sister Effie bought a boat"); the next
turns name what that one introduced ("Effie named it Maid of Kerry", "Maid of Kerry is
moored on Pudding Lane") and nothing of the question. ``hop_terms`` takes the words of the
best-ranked matches the question did not use; a search with them, bounded to words few
turns hold (names, places, things), finds the next turn of the chain, and a second hop from
those finds the one after (pseudo-relevance feedback, two rounds; docs/decisions/0037).
The chain's first turns often rank far below the best matches (the question matches its
first turn only by the subject's name), so after the fusion a names round takes the
capitalised words of the best-ranked turns (and their other forms: "Percy" / "Percival")
and moves the few other turns naming them right after the first (decision 0053).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from itertools import zip_longest

from memory.aliases import opens_sentence
from memory.models import Turn
from memory.search_text import MAX_QUERY_TERMS, query_terms

__all__ = ["HOPS", "HOP_DOCS", "HOP_FROM", "HOP_LIMIT", "NAME_BATCH", "NAME_DOCS", "NAME_LIMIT",
           "NAME_MIN_ROOM", "NAME_ROOM", "NAME_SHARE", "after_sources", "hop_terms", "name_sources",
           "name_terms", "with_chains"]

HOPS = 2
"""Rounds of searching again: a chain of up to three steps beyond the first match."""
HOP_FROM = 3
"""Best matches (people's) whose words a round searches with, one search each."""
HOP_DOCS = 10
"""A word held by more of the searched turns than this does not lead anywhere particular
(the store leaves it out of the hop's search)."""
HOP_LIMIT = 4
"""Turns one source's search adds at most."""
NAME_SHARE = 0.2
"""Share of the recall room whose best-ranked turns the names round takes its names from."""
NAME_DOCS = 5
"""A name held by more of the searched turns than this is left out of the names round."""
NAME_ROOM = 0.3
"""Share of the recall room the turns the names round moves up may take at most."""
NAME_MIN_ROOM = 1_000
"""Recall room (tokens) below which there is no names round: in so small a room (a memory
budget near 1,000 tokens) its turns push the question's own matches out."""
NAME_LIMIT = 4
"""Turns the names round adds at most per name searched."""
NAME_BATCH = 8
"""Names one search of the names round holds: a turn search uses its rarest eight terms
(``stores.common.TURN_QUERY_TERMS``), so more would be dropped."""

_WORD = re.compile(r"[^\W\d_]+")


def name_sources(ranked: Sequence[Turn], room: int) -> list[Turn]:
    """People's turns among the best of ``ranked`` whose tokens add up to at most
    ``NAME_SHARE`` of ``room``: the names round's sources."""
    out: list[Turn] = []
    used = 0
    for turn in ranked:
        used += turn.tokens
        if used > room * NAME_SHARE:
            break
        if turn.role != "assistant":
            out.append(turn)
    return out


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



def name_terms(sources: Iterable[Turn], used: set[str],
               named: Callable[[str], bool] = lambda _: False) -> dict[str, int]:
    """The names of people's ``sources`` (words written capitalised inside a sentence, or
    opening one when ``named`` says the channel writes them so elsewhere: "Percy, my
    cousin …" but not "Honestly, …") as search terms not in ``used``, each with the seq
    of the first source that says it."""
    out: dict[str, int] = {}
    for t in sources:
        if t.role == "assistant":
            continue
        for word, opens, found in _capitals(t.text):
            if not opens or named(word):
                for term in found:
                    if term not in used:
                        out.setdefault(term, t.seq)
    return out


@lru_cache(maxsize=4096)
def _capitals(text: str) -> tuple[tuple[str, bool, tuple[str, ...]], ...]:
    """The capitalised words of ``text`` in order, each casefolded, whether it opens a
    sentence, and its search terms: what ``name_terms`` reads of a turn depends on its text
    alone, and the next reply's names round reads mostly the same best turns again
    (docs/decisions/0056)."""
    return tuple((m.group().casefold(), opens_sentence(text, m.start()),
                  tuple(query_terms(m.group())))
                 for m in _WORD.finditer(text) if m.group()[0].isupper())


def with_chains(hits: Sequence[Turn], names: Mapping[str, int], found: Iterable[Turn],
                room: int) -> list[Turn]:
    """``hits`` (ranked) with each turn of ``found`` right after the best-ranked source
    (``names``: term -> source seq) whose name it holds, unless it already ranks above
    that source: the turns that speak of one person stay together (chains). The best
    sources' turns first, up to ``NAME_ROOM`` of ``room`` in tokens: the rest would push
    the other matches out of a small room."""
    pos = {t.seq: i for i, t in enumerate(hits)}
    last = len(hits)
    led: dict[int, list[Turn]] = {}
    for turn in found:
        sources = [names[w] for w in query_terms(turn.text) if w in names]
        if not sources:
            continue
        source = min(sources, key=lambda s: pos.get(s, last))
        if pos.get(turn.seq, last) > pos.get(source, last):
            led.setdefault(source, []).append(turn)
    kept: dict[int, list[Turn]] = {}
    left = room * NAME_ROOM
    for source in sorted(led, key=lambda s: pos.get(s, last)):
        for turn in led[source]:
            left -= turn.tokens
            if left < 0:
                return after_sources(hits, kept)
            kept.setdefault(source, []).append(turn)
    return after_sources(hits, kept)
