"""How relevant a remembered item is to the message being answered.

A reply's memory is chosen for the message that triggered it: the message's own terms weigh
most, the few turns before it add context (a short "and the other one?" needs them), and
recency only breaks ties. Terms are those of ``memory.search_text`` (lower-cased words,
CJK bigrams), so ranking agrees with what the stores' full-text search matched.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory.models import CarriedIdentifier
from memory.search_text import query_terms, terms

__all__ = ["CONTEXT_WEIGHT", "QueryWeights", "query_weights", "rank_facts", "score"]

CONTEXT_WEIGHT = 0.3
"""Weight of a term that appears only in the turns before the message, not in it."""

QueryWeights = dict[str, float]


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
    return sum(weights.get(t, 0.0) for t in set(terms(text).split()))


def rank_facts(
    facts: Sequence[CarriedIdentifier], weights: QueryWeights
) -> list[CarriedIdentifier]:
    """Carried identifiers, most relevant first; among equals the most recently mentioned.

    The identifiers stated with the best match (same turn and speaker, or the same
    context) come right after it, whatever their own words: a message that lists several
    answers often names the subject once, and a small view must not keep half of them."""
    scores = [score(f"{f.value} {f.context}", weights) for f in facts]
    order = sorted(range(len(facts)), key=lambda i: (scores[i], facts[i].last_seen_seq),
                   reverse=True)  # stable: equals keep their given order
    ranked = [facts[i] for i in order]
    if not order or scores[order[0]] <= 0:
        return ranked
    top = scores[order[0]]
    best = [facts[i] for i in order if scores[i] == top]
    turns = {_stated(f) for f in best}
    contexts = {f.context for f in best if f.context}
    together = [i for i in order if scores[i] < top
                and (_stated(facts[i]) in turns or facts[i].context in contexts)]
    if not together:
        return ranked
    moved = set(together)
    return [*best, *(facts[i] for i in together),
            *(facts[i] for i in order[len(best):] if i not in moved)]


def _stated(fact: CarriedIdentifier) -> tuple[int, int, str]:
    """Where ``fact`` was said: its turns and speaker (a context starts ``Name: ``)."""
    return fact.first_seq, fact.last_seen_seq, fact.context.partition(": ")[0]
