"""The order of recalled turns: the lexical ranking fused with other evidence of relevance.

The store's search ranks a reply's candidate turns by BM25 (``ts_rank`` on PostgreSQL). A
paraphrased question often shares no telling word with the turn that answers it ("what
did Evan call his new dog?" / Evan: "we named him Mochi!"), so that turn is found only
through the speaker's name and ranks far down. ``rank`` re-orders the candidates by a
weighted reciprocal rank fusion (``fuse``) of ranked lists of the same candidates:

* **lexical** — the store's order (its passes and the follow-up search);
* **speaker** — the turns of the people the question names, else of its author;
* **window** — turns within ``WINDOW`` turns of one of the best lexical hits, said by the
  speakers around that hit: the conversation a hit belongs to;
* **specific** — turns holding a word that few candidates hold (a name, a place, a number)
  before those made of words every other turn repeats;
* **recency** — newest first; with equal scores the newer turn wins.

People's messages come first, texts said again after them, chains kept together
(``memory.together``). Another ranked list is fused by passing it to ``rank`` as ``extra``:
semantic recall's nearest turns (``memory.semantic``), joining the candidates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain

from memory.models import Turn
from memory.recall import asked, people_first
from memory.search_text import cached_term_set, query_terms, terms
from memory.together import kept_together, said_again_last

__all__ = ["RRF_K", "WINDOW", "Ranked", "Weights", "fuse", "named_speakers", "rank"]

RRF_K = 60
"""Reciprocal rank fusion's constant: a list's rank ``r`` adds ``weight / (RRF_K + r)``."""
WINDOW = 2
"""Turns either side of a best lexical hit that the window list takes in."""
WINDOW_HITS = 5
"""How many of the best lexical hits lend their window."""


@dataclass(frozen=True, slots=True)
class Weights:
    """Each list's weight in the fusion (0 leaves a list out)."""

    lexical: float = 1.0
    speaker: float = 1.0
    author: float = 0.5
    """The speaker list's weight when the question names no one: its author's turns."""
    window: float = 0.5
    specific: float = 3.0
    recency: float = 0.1
    adjusted: bool = True
    """Whether the fused order is adjusted for a small room (``memory.together``: texts
    said again last, chains kept together); False: people's messages first, nothing else."""


WEIGHTS = Weights()


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked list of candidates (best first) and its weight in the fusion."""

    turns: Sequence[Turn]
    weight: float


def fuse(lists: Sequence[Ranked], k: int | None = None) -> list[Turn]:
    """Weighted reciprocal rank fusion: each turn scores the sum over the lists holding it
    of ``weight / (k + rank)`` (rank from 1; ``k`` default ``RRF_K``), best first; ties:
    newer first. A turn in no list is not returned."""
    k = RRF_K if k is None else k
    score: dict[int, float] = {}
    turn: dict[int, Turn] = {}
    for ranked in lists:
        if ranked.weight <= 0:
            continue
        for r, t in enumerate(ranked.turns, start=1):
            score[t.seq] = score.get(t.seq, 0.0) + ranked.weight / (k + r)
            turn.setdefault(t.seq, t)
    return [turn[s] for s in sorted(score, key=lambda s: (score[s], s), reverse=True)]


@lru_cache(maxsize=256)
def _name_terms(author_name: str) -> frozenset[str]:
    return frozenset(t for t in terms(author_name).split() if len(t) > 1)


def named_speakers(question: str, candidates: Sequence[Turn]) -> set[str]:
    """The author ids of ``candidates`` whose name (a word of it) the question holds."""
    words = set(query_terms(question, common=True))
    authors = {t.author_id: t.author_name for t in candidates if t.role != "assistant"}
    return {a for a, name in authors.items() if _name_terms(name) & words}


def _counts(candidates: Sequence[Turn]) -> tuple[list[frozenset[str]], Counter[str]]:
    """Each candidate's terms and how many candidates hold each term: one count of all the
    words, at C level (docs/decisions/0027), that ``_specific`` and ``together`` share."""
    words = [cached_term_set(t.text) for t in candidates]
    return words, Counter(chain.from_iterable(words))


def _specific(candidates: Sequence[Turn],
              counted: tuple[list[frozenset[str]], Counter[str]] | None = None) -> list[Turn]:
    """``candidates`` ordered by how few of them hold their rarest word (ties: their
    order): a turn that states something particular holds a word the others do not.
    ``counted``: ``_counts(candidates)``, when the caller has it."""
    # On the reply path over every candidate: a C-level ``min`` per turn, not a Python
    # loop per word (docs/decisions/0027).
    words, df = _counts(candidates) if counted is None else counted
    floor = len(candidates) + 1
    rarest = [min(map(df.__getitem__, w)) if w else floor for w in words]
    order = sorted(range(len(candidates)), key=rarest.__getitem__)
    return [candidates[i] for i in order]


def _window(hits: Sequence[Turn], pool: Sequence[Turn]) -> list[Turn]:
    """The candidates (``pool``) within ``WINDOW`` turns of one of the ``WINDOW_HITS`` best
    lexical ``hits`` and said by a speaker of that stretch (the hit's, or a candidate's
    right beside it), the nearest first (ties: the better hit's)."""
    by_seq = {t.seq: t for t in pool}
    near: dict[int, tuple[int, int]] = {}
    for i, hit in enumerate(hits[:WINDOW_HITS]):
        speakers = {hit.author_id} | {by_seq[s].author_id for s in (hit.seq - 1, hit.seq + 1)
                                      if s in by_seq}
        for d in range(-WINDOW, WINDOW + 1):
            t = by_seq.get(hit.seq + d)
            if t is not None and d != 0 and t.author_id in speakers:
                near[t.seq] = min(near.get(t.seq, (abs(d), i)), (abs(d), i))
    return [by_seq[s] for s in sorted(near, key=lambda s: near[s])]


def rank(hits: Sequence[Turn], asking: Sequence[Turn], *, weights: Weights | None = None,
         extra: Sequence[Ranked] = ()) -> list[Turn]:
    """``hits`` (the store's lexical order, best first) re-ordered for the message that is
    the last of ``asking`` (the few turns before it may carry the bot's name, which
    ``recall.asked`` leaves out): the fusion of the module docstring plus ``extra``.

    The candidates are ``hits`` and the turns only ``extra`` found (a paraphrase no word
    search finds): the speaker, window, specific and recency lists order them all, so such
    a turn gains from its speaker or a rare word as a lexical hit does; the lexical list
    is ``hits`` alone. People's messages before the bot's replies."""
    if not asking or (len(hits) < 2 and not extra):
        return people_first(hits)
    w = WEIGHTS if weights is None else weights
    found = {t.seq for t in hits}
    pool = [*hits, *{t.seq: t for r in extra if r.weight > 0 for t in r.turns
                     if t.seq not in found}.values()]
    question = asked(asking)[0]
    named = named_speakers(question, pool)
    wanted = named or {asking[-1].author_id}
    counted = _counts(pool)
    lists = [
        Ranked(hits, w.lexical),
        Ranked([t for t in pool if t.author_id in wanted], w.speaker if named else w.author),
        Ranked(_window(hits, pool), w.window),
        Ranked(_specific(pool, counted) if w.specific > 0 else (), w.specific),
        Ranked(sorted(pool, key=lambda t: t.seq, reverse=True), w.recency),
        *extra,
    ]
    # People's messages first, those said again after them; chains kept together
    # (``memory.together``, docs/decisions/0052).
    fused = fuse(lists)
    if not w.adjusted:
        return people_first(fused)
    # The fused turns are the pool's unless a list was weighed 0: then count them anew.
    return kept_together(said_again_last(fused), question,
                         counted[1] if len(fused) == len(pool) else None)
