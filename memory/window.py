"""When to compact, how much to fold, and what a reply's prompt may hold.

Two rules, both pure functions so they can be property-tested:

* **Trigger and fold (hysteresis).** Compaction starts when the unfolded turns exceed
  ``max_messages`` (or ``window_tokens``) and folds the oldest turns until at most
  ``keep_messages`` (and ``keep_tokens``) remain. With the defaults 10/4, one summarizer
  call absorbs 7 turns, not 1. A single call folds at most ``max_fold_tokens`` (labels
  counted) so a channel that fell far behind, say after many failed or preempted
  summaries, catches up in several calls that each fit the model's context.
* **The view never exceeds its budget.** Summary first (it stands for everything older),
  then carried facts (most recently mentioned first), then the newest turns that fit.
  Turns that do not fit are left out of the *prompt* only. A turn larger than
  ``max_turn_share`` of the budget is cut with a visible marker, so one pasted log cannot
  push the whole conversation out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from memory.models import CarriedIdentifier, MemoryView, SummaryState, Turn
from memory.speakers import speaker_label
from memory.text import defuse
from memory.tokens import Tokenizer

__all__ = [
    "FOLD_TURN_OVERHEAD",
    "MESSAGE_FRAMING",
    "TURN_OVERHEAD",
    "WindowPolicy",
    "build_view",
    "carried_line",
    "fit_facts",
    "newest_that_fold",
    "pick_newest",
    "truncate_marked",
    "turn_cost",
]

TURN_OVERHEAD = 6
"""Tokens a turn's message may cost beyond its text and its label counted apart: framing
(3), role (1) and slack for a BPE merge at the join of label and text. What
``fixed_overhead`` reserves for a message; a turn shown is priced exactly (``turn_cost``)."""


MESSAGE_FRAMING = 3
"""Tokens a chat message costs beyond its content and its role's count by the recipe the
budget is measured with (``benchmarks.longmem.methods.memory_tokens``). A turn's content
(``[Name]: `` label and text) is counted as one string, so no slack for a merge at their
join is needed (docs/decisions/0056)."""


def turn_cost(turn: Turn, tokenizer: Tokenizer) -> int:
    """Tokens ``turn`` takes in a prompt, as ``bot.conversation.prompts`` renders it: its
    message's content counted whole, its role and the message framing."""
    label = speaker_label(turn.author_name) if turn.role == "user" else ""
    return tokenizer.count(label + turn.text) + tokenizer.count(turn.role) + MESSAGE_FRAMING


FOLD_TURN_OVERHEAD = 5
"""Tokens a folded turn costs in a summary request beyond its text: its ``[Name]: `` label
and line break (``max_fold_tokens`` counts them)."""


@dataclass(frozen=True, slots=True)
class WindowPolicy:
    """Compaction trigger and fold target. ``0`` disables a limit (``max_messages=0``: no
    message count limit, a token window only), except that a token window without
    ``keep_tokens`` folds down to half the window."""

    max_messages: int = 10
    keep_messages: int = 4
    window_tokens: int = 0
    keep_tokens: int = 0
    max_fold_tokens: int = 8000

    def __post_init__(self) -> None:
        if self.keep_messages < 0 or self.max_messages < 0:
            raise ValueError("max_messages and keep_messages must be >= 0")
        if not self.max_messages and not self.window_tokens:
            raise ValueError("a window needs max_messages or window_tokens")
        if self.max_messages and self.keep_messages >= self.max_messages:
            raise ValueError("keep_messages must be smaller than max_messages")
        if self.window_tokens and self.keep_tokens >= self.window_tokens:
            raise ValueError("keep_tokens must be smaller than window_tokens")

    @classmethod
    def for_budget(cls, budget: int, *, summary_tokens: int, window_share: float = 0.45,
                   keep_share: float = 0.1) -> WindowPolicy:
        """The default window, in tokens, derived from a reply's memory budget: compact when
        the unsummarized turns pass ``window_share`` of what the summary leaves, fold down
        to ``keep_share``. One call then folds 35% of the budget: a summary request's fixed
        part (rules, previous summary, carried facts, the answer) costs about twice what a
        fold of a 4,096-token context holds, so the fewer folds, the cheaper
        (docs/decisions/0030). From a large budget on the window is as large as the view's
        verbatim share (``memory.view.ViewSplit.recent_room``, the same 45%), so the
        unfolded turns fit it but for their labels; in a small one the verbatim share is
        smaller, and the unfolded turns it leaves out are reached by the turn search and by
        the fill with the conversation just before."""
        room = max(budget - summary_tokens, 40)
        window = max(int(room * window_share), 20)
        return cls(max_messages=0, keep_messages=0, window_tokens=window,
                   keep_tokens=max(min(int(room * keep_share), window - 1), 1))

    def should_compact(self, count: int, tokens: int) -> bool:
        """True when the unfolded turns overflow the window."""
        by_count = bool(self.max_messages) and count > self.max_messages
        return by_count or bool(self.window_tokens and tokens > self.window_tokens)

    def fold_count(self, pending: Sequence[Turn]) -> int:
        """How many of the oldest ``pending`` turns one compaction should fold (maybe 0)."""
        if not self.should_compact(len(pending), sum(t.tokens for t in pending)):
            return 0
        # With a token window but no KEEP_TOKENS, keep half the window: without any token
        # bound a token overflow of few turns would fold nothing and compaction would spin.
        keep_tokens = 0
        if self.window_tokens:
            keep_tokens = self.keep_tokens or max(self.window_tokens // 2, 1)
        n_keep = 0
        kept_tokens = 0
        for turn in reversed(pending):
            if self.max_messages and n_keep >= self.keep_messages:
                break
            if keep_tokens and kept_tokens + turn.tokens > keep_tokens:
                break
            n_keep += 1
            kept_tokens += turn.tokens
        n = len(pending) - n_keep
        # Bound one call's input (each turn with its speaker label); always fold at least
        # one turn so progress is guaranteed.
        folded_tokens = 0
        for i, turn in enumerate(pending[:n]):
            folded_tokens += turn.tokens + FOLD_TURN_OVERHEAD
            if folded_tokens > self.max_fold_tokens and i > 0:
                return i
        return n


def newest_that_fold(turns: Sequence[Turn], max_fold_tokens: int) -> list[Turn]:
    """The newest of ``turns`` whose tokens (each with its speaker label) fit
    ``max_fold_tokens``, in order; always the newest one."""
    total, start = 0, len(turns)
    for i in range(len(turns) - 1, -1, -1):
        total += turns[i].tokens + FOLD_TURN_OVERHEAD
        if total > max_fold_tokens and i < len(turns) - 1:
            break
        start = i
    return list(turns[start:])


def truncate_marked(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """Cut ``text`` to ``max_tokens`` including a marker saying how much was left out."""
    total = tokenizer.count(text)
    if total <= max_tokens:
        return text
    marker = f" […truncated, {total} tokens in full]"
    room = max_tokens - tokenizer.count(marker)
    while room > 0:
        # BPE can merge across the join, so re-count and shrink until it fits.
        cut = tokenizer.truncate(text, room) + marker
        if tokenizer.count(cut) <= max_tokens:
            return cut
        room -= 1
    return tokenizer.truncate(marker.strip(), max_tokens)


def carried_line(fact: CarriedIdentifier) -> str:
    """One carried identifier as the prompt shows it (before defusing)."""
    return f"- {fact.value} — {fact.context}" if fact.context else f"- {fact.value}"


def fit_facts(
    facts: Sequence[CarriedIdentifier], summary: str, budget: int, tokenizer: Tokenizer
) -> tuple[tuple[CarriedIdentifier, ...], int]:
    """The first of ``facts`` (in the given order) that fit ``budget``, skipping those whose
    value ``summary`` (the text already in the prompt) shows; and their cost."""
    chosen: list[CarriedIdentifier] = []
    used = 0
    for fact in facts:  # already ordered by last mention, newest first
        if fact.value in summary:
            continue
        # Paid as rendered: defusing fence markers makes a line cost more than its parts.
        cost = tokenizer.count(defuse(carried_line(fact)) + "\n")  # with its break
        if used + cost > budget:
            continue  # a shorter, older fact may still fit
        chosen.append(fact)
        used += cost
    return tuple(chosen), used


def pick_newest(
    turns: Sequence[Turn], room: int, per_turn_cap: int, tokenizer: Tokenizer
) -> tuple[list[Turn], int, bool]:
    """The newest of ``turns`` (ascending) that fit ``room`` tokens, ascending, their cost,
    and whether one was cut: a turn over ``per_turn_cap``, or the newest when it alone is
    over ``room``, is cut with a marker instead of pushing everything out."""
    picked: list[Turn] = []
    used = 0
    truncated = False
    for turn in reversed(turns):
        cost = turn_cost(turn, tokenizer)  # as rendered: exact
        if turn.tokens > per_turn_cap or (cost > room - used and not picked):
            cut, cost = _cut(turn, min(per_turn_cap, room - used - cost + turn.tokens),
                             room - used, tokenizer)
            if cut is None:
                break
            turn, truncated = cut, True
        if cost > room - used:
            break
        picked.append(turn)
        used += cost
    picked.reverse()
    return picked, used, truncated


def _cut(turn: Turn, most: int, room: int, tokenizer: Tokenizer) -> tuple[Turn | None, int]:
    """``turn`` cut with a marker to at most ``most`` tokens of text and its cost, less
    when the cut text's message costs more than ``room`` (the label may join the cut text
    differently); None when no cut fits."""
    while most > 0:
        text = truncate_marked(turn.text, most, tokenizer)
        cut = replace(turn, text=text, tokens=tokenizer.count(text))
        cost = turn_cost(cut, tokenizer)
        if cost <= room:
            return cut, cost
        most -= cost - room
    return None, 0


def build_view(
    state: SummaryState,
    turns: Sequence[Turn],
    *,
    budget: int,
    tokenizer: Tokenizer,
    facts_budget: int,
    max_turn_share: float = 0.5,
    facts: Sequence[CarriedIdentifier] | None = None,
) -> MemoryView:
    """Fit summary, facts and the newest of ``turns`` (ascending) into ``budget`` tokens.

    ``facts`` orders the carried identifiers (default: the state's, newest mention first).
    """
    budget = max(budget, 0)
    summary = defuse(state.text)  # paid as the prompt shows it
    summary_tokens = tokenizer.count(summary)
    if summary_tokens > budget:
        summary = truncate_marked(summary, budget, tokenizer)
        summary_tokens = tokenizer.count(summary)
    remaining = budget - summary_tokens
    carried = state.facts if facts is None else facts
    chosen, facts_tokens = fit_facts(carried, summary, min(facts_budget, remaining), tokenizer)
    remaining -= facts_tokens

    per_turn_cap = max(int(budget * max_turn_share), 1)
    picked, used, truncated = pick_newest(turns, remaining, per_turn_cap, tokenizer)
    return MemoryView(
        key=state.key,
        summary=summary,
        summary_tokens=summary_tokens,
        facts=chosen,
        facts_tokens=facts_tokens,
        turns=tuple(picked),
        turns_tokens=used,
        dropped=len(turns) - len(picked),
        truncated=truncated,
        version=state.version,
    )
