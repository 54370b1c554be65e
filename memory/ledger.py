"""The identifier ledger: which identifiers a summary must keep, and which carried ones a
summarizer request shows.

*Required* identifiers (``required_identifiers``) are those of the folded turns and of the
previous summary, with two exclusions that keep the ledger about what people said:

* an identifier that only the bot said (in ``assistant`` turns) counts only when a user said
  it too: in a folded user turn, the previous summary or a carried fact;
* an identifier of gistbot's own request text (its rules, "Token limit: 600", the retry
  message) never counts unless a user said it. A summary model sometimes echoes that text
  ("Summary (under 600 tokens)"), and the previous summary is read back on the next
  compaction: that is how a "600" entered the ledger of a long run.

*Shown* facts (``facts_for_request``): the ledger grows with the channel's age, a request
must not. A request shows the carried facts relevant to the turns being folded (mentioned
in them, then sharing rare search terms with them) and then the most recently mentioned
(at most ``RECENT_FACTS``), all within ``CARRIED_TOKENS``. The others are not lost: the
summarizer returns only the facts it updates or adds, and the store *upserts* them, so a
fact left out of a request stays in the ledger unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache

from memory.identifiers import contains_identifier, extract_identifiers, mentioned_in
from memory.models import CarriedIdentifier, Turn
from memory.search_text import query_terms
from memory.summary_prompt import format_fact, request_boilerplate
from memory.tokens import Tokenizer

__all__ = [
    "CARRIED_TOKENS",
    "RECENT_FACTS",
    "facts_for_request",
    "own_identifiers",
    "required_identifiers",
    "spoken_identifiers",
]

CARRIED_TOKENS = 300
"""Most tokens of carried facts one summarizer request shows."""
RECENT_FACTS = 20
"""Most carried facts a request shows only because they were mentioned recently."""


@lru_cache(maxsize=16)
def own_identifiers(max_tokens: int) -> frozenset[str]:
    """Identifiers in gistbot's own summarizer request text for this bound."""
    return frozenset(extract_identifiers(request_boilerplate(max_tokens)))


def spoken_identifiers(turns: Sequence[Turn], vouched: Iterable[str] = ()) -> list[str]:
    """Identifiers of ``turns`` in order: all of the users', and the bot's only when a user
    said them too (in a user turn here, or in ``vouched`` text such as the summary)."""
    users = "\n".join(t.text for t in turns if t.role != "assistant")
    said = mentioned_in("\n".join([users, *vouched]))
    out: dict[str, None] = {}
    for turn in turns:
        for ident in extract_identifiers(turn.text):
            if turn.role != "assistant" or said(ident):
                out[ident] = None
    return list(out)


def required_identifiers(
    previous_text: str,
    facts: Sequence[CarriedIdentifier],
    turns: Sequence[Turn],
    *,
    max_tokens: int,
) -> list[str]:
    """Identifiers the new summary must contain, folded turns first (see module docstring)."""
    users = "\n".join(t.text for t in turns if t.role != "assistant")
    own = own_identifiers(max_tokens)
    fact_values = [f.value for f in facts]
    found = spoken_identifiers(turns, [previous_text, *fact_values])
    found += [
        i
        for i in extract_identifiers(previous_text)
        if i not in own or contains_identifier(users, i)
    ]
    return list(dict.fromkeys(found))


def facts_for_request(
    facts: Sequence[CarriedIdentifier],
    turns: Sequence[Turn],
    tokenizer: Tokenizer,
    *,
    budget: int = CARRIED_TOKENS,
    recent: int = RECENT_FACTS,
) -> list[CarriedIdentifier]:
    """The carried facts a request about ``turns`` shows, in ``facts``' order."""
    if not facts:
        return []
    in_fold = mentioned_in("\n".join(t.text for t in turns))
    wanted = set(query_terms(*(t.text for t in turns)))
    fact_terms = [set(query_terms(f.value, f.context)) for f in facts]
    df: dict[str, int] = {}
    for ts in fact_terms:
        for term in ts & wanted:
            df[term] = df.get(term, 0) + 1
    n = len(facts)

    def score(i: int) -> float:  # rare shared terms weigh most; one in every fact, nothing
        return sum(math.log(n / df[t]) for t in fact_terms[i] & wanted)

    mentioned = [i for i, f in enumerate(facts) if in_fold(f.value)]
    said = set(mentioned)
    shared = sorted(
        (i for i in range(n) if i not in said and score(i) > 0),
        key=lambda i: (-score(i), -facts[i].last_seen_seq),
    )
    newest = sorted(range(n), key=lambda i: -facts[i].last_seen_seq)[:recent]
    chosen: set[int] = set()
    used = 0
    for i in [*mentioned, *shared, *newest]:
        cost = tokenizer.count(format_fact(facts[i])) + 1
        if i not in chosen and used + cost <= budget:
            chosen.add(i)
            used += cost
    return [f for i, f in enumerate(facts) if i in chosen]
