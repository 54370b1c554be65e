"""How relevant a remembered item is to the message being answered.

A reply's memory is chosen for the message that triggered it: the message's own terms weigh
most, the few turns before it add context (a short "and the other one?" needs them), and
recency only breaks ties. Terms are those of ``memory.search_text`` (lower-cased words,
CJK bigrams), so ranking agrees with what the stores' full-text search matched.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from memory.models import CarriedIdentifier
from memory.search_text import query_terms, terms

__all__ = ["ADJACENT", "CONTEXT_WEIGHT", "QueryWeights", "query_weights", "rank_facts", "score"]

CONTEXT_WEIGHT = 0.3
"""Weight of a term that appears only in the turns before the message, not in it."""

QueryWeights = dict[str, float]

ADJACENT = 2
"""Most seqs between two turns of one speaker that state identifiers together: the next
message, or the one after another person's (or the bot's) message."""


def query_weights(message: str, context: Sequence[str] = ()) -> QueryWeights:
    """Term weights for ranking: 1.0 for the message's terms, ``CONTEXT_WEIGHT`` for the
    terms only the preceding turns (newest first) contribute."""
    weights: QueryWeights = dict.fromkeys(query_terms(message), 1.0)
    for term in query_terms(*context):
        weights.setdefault(term, CONTEXT_WEIGHT)
    return weights


def score(text: str, weights: QueryWeights) -> float:
    """Sum of the weights of the distinct query terms that ``text`` contains."""
    if not weights:
        return 0.0
    return sum(weights.get(t, 0.0) for t in _terms(text))


@lru_cache(maxsize=2048)
def _terms(text: str) -> frozenset[str]:
    """The distinct terms of ``text``: remembered, since every reply's view scores the
    channel's carried identifiers again (their text changes only when a compaction
    commits)."""
    return frozenset(terms(text).split())


def rank_facts(
    facts: Sequence[CarriedIdentifier], weights: QueryWeights
) -> list[CarriedIdentifier]:
    """Carried identifiers, most relevant first; among equals the most recently mentioned.

    The identifiers stated with the best match come right after it, whatever their own
    words: a message that lists several answers often names the subject once, and so does
    a speaker who gives them in a run of short messages ("gate code GATE-5521", "access
    card AC-33018"); a small view must not keep half of them. Stated with it: by the same
    speaker in a turn at most ``ADJACENT`` seqs from one already stated with it (so a run
    of messages, another's message in between allowed), or with the same context."""
    scores = [score(f"{f.value} {f.context}", weights) for f in facts]
    order = sorted(range(len(facts)), key=lambda i: (scores[i], facts[i].last_seen_seq),
                   reverse=True)  # stable: equals keep their given order
    ranked = [facts[i] for i in order]
    if not order or scores[order[0]] <= 0:
        return ranked
    top = scores[order[0]]
    best = [i for i in order if scores[i] == top]
    together = _stated_with(facts, best, [i for i in order if scores[i] < top])
    if not together:
        return ranked
    moved = set(together)
    return [*(facts[i] for i in best), *(facts[i] for i in together),
            *(facts[i] for i in order[len(best):] if i not in moved)]


def _stated_with(facts: Sequence[CarriedIdentifier], best: Sequence[int],
                 rest: Sequence[int]) -> list[int]:
    """Those of ``rest`` (in their order) stated with the facts ``best``: the same context,
    or the same speaker within ``ADJACENT`` seqs of one stated with them, transitively."""
    seqs: dict[str, set[int]] = {}
    for i in best:
        seqs.setdefault(_speaker(facts[i]), set()).add(facts[i].first_seq)
    contexts = {facts[i].context for i in best if facts[i].context}
    chosen: set[int] = set()
    grew = True
    while grew:  # a run of messages joins one at a time; each pass adds at least one
        grew = False
        for i in rest:
            fact = facts[i]
            near = seqs.get(_speaker(fact), set())
            if i not in chosen and (fact.context in contexts or any(
                    abs(fact.first_seq - s) <= ADJACENT for s in near)):
                chosen.add(i)
                seqs.setdefault(_speaker(fact), set()).add(fact.first_seq)
                grew = True
    return [i for i in rest if i in chosen]


def _speaker(fact: CarriedIdentifier) -> str:
    """Who stated ``fact``: its context starts ``Name: `` (else the whole context, which
    then only matches itself)."""
    return fact.context.partition(": ")[0]
