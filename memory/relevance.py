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
    """Carried identifiers, most relevant first; among equals the most recently mentioned."""
    return sorted(
        facts,
        key=lambda f: (score(f"{f.value} {f.context}", weights), f.last_seen_seq),
        reverse=True,
    )
