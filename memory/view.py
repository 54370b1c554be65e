"""A reply's memory view that fills its budget: recent turns, relevant facts, recall.

``B`` is what a reply may spend on memory (``CONTEXT_TOKENS − REPLY_TOKENS`` minus the
system prompt and the fence framing), split in this order:

1. **The rolling summary**, whole (cut with a marker only if larger than ``B``); ``R`` is
   what remains.
2. **The newest turns verbatim**, the message first, up to a share of ``R`` that is
   ``small_share`` up to ``grows_from`` and grows to ``recent_share`` at ``full_shares_at``,
   so a small budget keeps most of itself for recall (but the ``min_turns`` before it).
3. **Carried identifiers**, most relevant first, up to the facts share of ``R``.
4. **Recall**, everything left (or ``RECALL_TOKENS``): long-term facts, the best-matching
   older turns with their neighbours, other matches (one that answers a question with "she …"
   with that question, a question with the reply after it that speaks of someone as "he" or
   "she": ``memory.antecedent``), episodes; grouped by day.
5. What recall leaves goes to older verbatim turns.

The view never exceeds ``B``: every item is paid for as ``bot.conversation.prompts`` renders it. Why
the shares and the recall order are what they are: docs/decisions/0014.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from memory.antecedent import answers_about, asks, refers_back
from memory.models import (
    CarriedIdentifier,
    MemoryView,
    Recall,
    SummaryState,
    Turn,
)
from memory.priced_lines import line_cost, priced
from memory.recall import (
    RECALL_HEADING,
    TURNS_HEADING,
    day_heading,
    episode_line,
    fact_line,
)
from memory.text import defuse
from memory.tokens import Tokenizer
from memory.window import build_view, fit_facts, pick_newest, truncate_marked, turn_cost

__all__ = [
    "Composed",
    "Recent",
    "ViewSplit",
    "compose_parts",
    "compose_view",
    "recent_part",
    "within_reach",
]

_LINE = 1  # the line break after each rendered line
_NOTHING = Recall()
_WITH_NEIGHBOURS = 3  # best matches shown with the turns around them before anything else
_SLACK = 4
"""Tokens a rendered line may count below its text's own count (the text's first word
joins the space before it; an unknown model's x1.1 rounds up): see ``_cannot_fit``."""
_NEIGHBOURS_ROOM = 2500
"""Recall room below which every match comes before any neighbour: in a small budget a
neighbour would displace a match (at ``CONTEXT_TOKENS=4000`` the room is ~2,000 tokens, and
the three best matches' neighbours, often long chatter, took a third of it;
docs/decisions/0050)."""
_TEXTS = 4096
"""Candidate texts whose per-text checks are remembered across views (``_remembered``)."""
_TEXT_CHARS = 2000
"""Longer texts are checked each time: the caches hold a few MiB at most."""
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ViewSplit:
    """How a view divides its budget (see the module docstring)."""

    recent_share: float = 0.45
    facts_tokens: int = 300
    facts_share: float = 0.1
    small_share: float = 0.10
    """The verbatim share of a tiny view; it grows linearly to ``recent_share`` at
    ``full_shares_at``."""
    facts_cap_share: float = 0.15
    """``FACTS_TOKENS`` is a floor only up to this share of ``R``, so it cannot crowd a
    small view."""
    full_shares_at: int = 8000
    """``R`` (tokens) from which the newest turns get the whole ``recent_share``."""
    grows_from: int = 3000
    """``R`` (tokens) up to which the newest turns get ``small_share`` only: below it the
    room is worth more to recall (docs/decisions/0056)."""
    min_turns: int = 3
    """Turns before the message shown verbatim whatever the share (up to a quarter of
    ``R``): the few a reply needs to follow the conversation."""
    recall_tokens: int | None = None
    """``None``: recall gets everything left; ``0``: no recall; else at most this many."""
    max_turn_share: float = 0.5
    max_recalled_turn: int = 200
    """Tokens at most one recalled message shows (longer ones are cut with a marker)."""

    def __post_init__(self) -> None:
        if not 0 < self.recent_share <= 1 or not 0 <= self.facts_share < 1:
            raise ValueError("recent_share must be in (0, 1] and facts_share in [0, 1)")
        if not 0 <= self.small_share <= 1 or not 0 <= self.facts_cap_share <= 1:
            raise ValueError("small_share and facts_cap_share must be in [0, 1]")
        if not 0 <= self.grows_from < self.full_shares_at or self.min_turns < 0:
            raise ValueError("need 0 <= grows_from < full_shares_at and min_turns >= 0")

    def recent_room(self, rest: int) -> int:
        """Tokens the newest turns may take of ``rest`` (what the summary leaves): a share
        that grows with ``rest`` from ``grows_from`` on, so a small budget keeps room for
        recall."""
        if rest >= self.full_shares_at:
            return int(rest * self.recent_share)
        low = min(self.small_share, self.recent_share)
        grown = max(rest - self.grows_from, 0) / (self.full_shares_at - self.grows_from)
        return int(rest * (low + (self.recent_share - low) * grown))

    def facts_room(self, rest: int) -> int:
        """Tokens the carried identifiers may take of ``rest``: ``facts_share`` of it, or
        ``facts_tokens`` if more, but that floor never more than ``facts_cap_share`` of
        it, where it would crowd a small view."""
        return max(int(rest * self.facts_share),
                   min(self.facts_tokens, int(rest * self.facts_cap_share)))


@dataclass(frozen=True, slots=True)
class Recent:
    """The summary and the newest turns a view shows verbatim (steps 1 and 2)."""

    summary: str
    summary_tokens: int
    rest: int  # R
    picked: list[Turn]
    used: int
    truncated: bool

    @property
    def first_seq(self) -> int | None:
        """The seq of the oldest turn shown verbatim (recall searches below it)."""
        return self.picked[0].seq if self.picked else None


def recent_part(
    state: SummaryState, turns: Sequence[Turn], budget: int, tokenizer: Tokenizer, split: ViewSplit
) -> Recent:
    """Steps 1 and 2 of the module docstring: the summary, and the newest turns verbatim.
    A reply's view computes it once: it tells recall where to search below
    (``Recent.first_seq``) and is then composed with what recall found (``compose_parts``)."""
    summary = defuse(state.text)  # paid as the prompt shows it
    summary_tokens = tokenizer.count(summary)
    if summary_tokens > budget:
        summary = truncate_marked(summary, budget, tokenizer)
        summary_tokens = tokenizer.count(summary)
    rest = budget - summary_tokens
    cap = max(int(budget * split.max_turn_share), 1)
    # The triggering message first: it gets in whole up to half the budget, whatever the
    # recent share; the turns before it share what the recent share leaves.
    picked, used, truncated = pick_newest(turns[-1:], rest, cap, tokenizer)
    if picked:
        few = sum(turn_cost(t, tokenizer) for t in turns[-1 - split.min_turns:-1])
        room = max(split.recent_room(rest) - used, min(few, rest // 4 - used), 0)
        more, more_used, more_cut = pick_newest(turns[:-1], room, cap, tokenizer)
        picked, used, truncated = more + picked, used + more_used, truncated or more_cut
    return Recent(summary, summary_tokens, rest, picked, used, truncated)


class _Budget:
    """Running cost of the recall section, headings paid once."""

    def __init__(self, room: int, tokenizer: Tokenizer) -> None:
        self.room = room
        self.used = 0
        self.tokenizer = tokenizer
        self.headings: set[str] = set()

    def heading_cost(self, heading: str) -> int:
        """What ``heading`` costs as rendered, with its line break: a section heading
        ("## …") also pays for the blank line before it; a day's ("### …") has none."""
        return line_cost(heading, self.tokenizer) + (0 if heading.startswith("### ") else _LINE)

    def take(self, lines: Sequence[str], headings: Sequence[str] = (), *,
             cost: int | None = None) -> bool:
        """Pay for ``lines`` (``cost``, when the caller priced them already) plus any of
        ``headings`` not paid yet; False if they do not fit."""
        new = [h for h in headings if h not in self.headings]
        if cost is None:  # paid as rendered
            cost = sum(line_cost(x, self.tokenizer) for x in lines)
        cost += sum(self.heading_cost(h) for h in new)
        if self.used + cost > self.room:
            return False
        self.used += cost
        self.headings.update(new)
        return True


def _cannot_fit(turn: Turn, left: int, split: ViewSplit) -> bool:
    """Whether ``turn``'s recalled line surely costs more than ``left`` tokens, known from
    its stored count without rendering and counting the line (a full view weighed ~300
    candidates a reply). Only for turns shown whole and as stored (``_plain``): a line holds
    the text after "- Name: ", so it counts at least the text's tokens minus ``_SLACK``.
    Never lets a line exceed the budget (every line taken is still counted); at worst it
    leaves out a line that would just have fit."""
    return (split.max_recalled_turn >= turn.tokens > left + _SLACK
            and _plain(turn.text))


def within_reach(hits: Sequence[Turn], room: int, split: ViewSplit) -> int:
    """How many of ``hits`` (best first) a recall room of ``room`` tokens could show: their
    lines' least costs (``_cannot_fit``'s bound) add up to at most ``room``, and at least
    the first ``_WITH_NEIGHBOURS``. Only these hits' neighbours can be shown beside them
    (``_recall`` tries hits before neighbours), so only theirs are read."""
    used = 0
    for i, hit in enumerate(hits):
        used += max(min(hit.tokens, split.max_recalled_turn) - _SLACK, 0) + _LINE
        if used > room:
            return max(i + 1, _WITH_NEIGHBOURS)
    return len(hits)


def _remembered(check: Callable[[str], _T]) -> Callable[[str], _T]:
    """``check`` of a text, remembered for the ``_TEXTS`` texts of at most
    ``_TEXT_CHARS`` checked last: the next view weighs mostly the same candidates."""
    cached = lru_cache(maxsize=_TEXTS)(check)

    def call(text: str) -> _T:
        return cached(text) if len(text) <= _TEXT_CHARS else check(text)

    return call


@_remembered
def _plain(text: str) -> bool:
    """Whether folding ``text``'s whitespace (``_said``) leaves it as it is, found without
    folding it: ``isprintable`` is False for every whitespace character but the space."""
    return text.isprintable() and "  " not in text and text[:1] != " " != text[-1:]


@_remembered
def _folded(text: str) -> str:
    return " ".join(text.split())


_refers_back = _remembered(refers_back)


def _said(turn: Turn) -> tuple[str, str, str]:
    """Who said what, whitespace-normalised: two turns with the same are one line to a
    reader, so recall shows such a message once ("Good for you!" said ten times would
    otherwise take ten lines of the recall room)."""
    return turn.role, turn.author_name, _folded(turn.text)


def _opening(turn: Turn) -> str | None:
    """A bot reply's first line, whitespace-normalised (None for people's messages): of
    the bot's replies that open with the same line, recall shows the first only, since a
    weak model that starts every reply with one copied line would fill recall with it."""
    if turn.role != "assistant":
        return None
    return " ".join(turn.text.strip().split("\n", 1)[0].split())


class _TurnPicker:
    """The older turns recall shows, taken one candidate at a time while the budget lasts.

    A turn the view shows already, one a reader has seen (``_said``: same speaker and
    words; ``_opening``: a bot reply opening with a line shown before) and one that does
    not fit are left out. A candidate may be weighed again (a hit, then a neighbour of
    another hit): each turn is normalised, cut, rendered and priced at most once a view.
    """

    def __init__(self, budget: _Budget, shown: Sequence[Turn], split: ViewSplit) -> None:
        self.budget = budget
        self.split = split
        self.shown_seqs = {t.seq for t in shown}
        self.seen = {_said(t) for t in shown}
        self.openings = {o for t in shown if (o := _opening(t)) is not None}
        self.turns: dict[int, Turn] = {}
        self.said: dict[int, tuple[str, str, str]] = {}
        self.priced: dict[int, tuple[Turn, str, int]] = {}

    def add(self, turn: Turn | None) -> None:
        """Show ``turn`` if it is new to the reader and its line fits."""
        if turn is None or turn.seq in self.shown_seqs or turn.seq in self.turns:
            return
        if _cannot_fit(turn, self.budget.room - self.budget.used, self.split):
            return  # surely too long: not worth folding, rendering and counting
        key = self.said.get(turn.seq)
        if key is None:
            key = self.said[turn.seq] = _said(turn)
        opening = _opening(turn)
        if key in self.seen or opening in self.openings:
            return  # said already
        cut, line, cost = self._priced(turn, key[2])
        if self.budget.take([line], [TURNS_HEADING, day_heading(cut)], cost=cost):
            self.turns[turn.seq] = cut
            self.seen.add(key)
            if opening is not None:
                self.openings.add(opening)

    def _priced(self, turn: Turn, words: str) -> tuple[Turn, str, int]:
        """``turn`` cut to the longest a recalled turn may be, its line and the line's cost
        (``memory.priced_lines``: priced once across views)."""
        if turn.seq not in self.priced:
            self.priced[turn.seq] = priced(turn, self.split.max_recalled_turn,
                                           self.budget.tokenizer, words)
        return self.priced[turn.seq]

    def picked(self) -> tuple[Turn, ...]:
        """The turns shown, oldest first."""
        return tuple(sorted(self.turns.values(), key=lambda t: t.seq))


def _recall(
    found: Recall,
    nearby: Sequence[Turn],
    shown: Sequence[Turn],
    room: int,
    tokenizer: Tokenizer,
    split: ViewSplit,
) -> tuple[Recall, int]:
    """What of ``found`` fits in ``room``, and its cost, taken in order of evidence: facts;
    the best hits with their neighbours (when the room allows); the other hits, each with
    the question it answers; episodes; then the remaining hits' neighbours."""
    budget = _Budget(room, tokenizer)
    facts = [f for f in found.facts if budget.take([fact_line(f)], [RECALL_HEADING])]
    picker = _TurnPicker(budget, shown, split)
    # A hit's neighbour may be a hit itself, ranked too low to be read as a neighbour.
    by_seq = {t.seq: t for t in (*nearby, *found.turns)}

    def around(hit: Turn) -> list[Turn | None]:
        return [by_seq.get(hit.seq - 1), by_seq.get(hit.seq + 1)]

    hits = [t for t in found.turns if t.seq not in picker.shown_seqs]
    first = _WITH_NEIGHBOURS if room >= _NEIGHBOURS_ROOM else 0
    for hit in hits[:first]:
        for turn in (hit, *around(hit)):
            picker.add(turn)
    for hit in hits[first:]:
        before = by_seq.get(hit.seq - 1)
        if before is not None and _refers_back(hit.text) and asks(before.text):
            picker.add(before)  # "How's Roz?" / "She fractured …": the answer with its question
        picker.add(hit)
        after = by_seq.get(hit.seq + 1)
        if after is not None and asks(hit.text) and answers_about(after, hit):
            picker.add(after)  # "Has anyone heard from Bart?" / "He went to see …"
    # Episodes after every match: an episode is a summary of a span, a matching turn is
    # the message itself, the better evidence (docs/decisions/0014).
    episodes = [e for e in found.episodes if budget.take([episode_line(e)], [RECALL_HEADING])]
    for hit in hits:
        for turn in around(hit):
            picker.add(turn)
    return Recall(tuple(facts), tuple(episodes), picker.picked()), budget.used


@dataclass(frozen=True, slots=True)
class Composed:
    """A view's summary, newest turns, identifiers and recall, fitted: what is left of the
    budget goes to older verbatim turns in ``view``. Kept apart so that a view whose recall
    left room can take in the earlier conversation read afterwards without weighing its
    recall again (``memory.archive``)."""

    state: SummaryState
    turns: Sequence[Turn]
    part: Recent
    facts: tuple[CarriedIdentifier, ...]
    facts_tokens: int
    recall: Recall
    recall_tokens: int
    left: int
    cap: int  # at most this many tokens for one older turn (longer ones are cut)
    tokenizer: Tokenizer

    def view(self, earlier: Sequence[Turn] = ()) -> MemoryView:
        """The view, with what recall left given to the newest older turns: those of
        ``turns`` below the verbatim ones, then ``earlier`` (stored turns just before
        ``turns``, ascending)."""
        part, turns, recall = self.part, self.turns, self.recall
        picked, used, truncated = part.picked, part.used, part.truncated
        recalled = {t.seq for t in recall.turns}
        # ``earlier`` may repeat the oldest of ``turns`` (both are read below the verbatim
        # ones): one candidate per seq, ascending.
        candidates = {t.seq: t for t in (*earlier, *turns)}
        older = [
            candidates[seq] for seq in sorted(candidates)
            if picked and seq < picked[0].seq and seq not in recalled
        ]
        if older and self.left > 0:  # recall left room: more of the conversation, verbatim
            extra, extra_used, extra_cut = pick_newest(older, self.left, self.cap, self.tokenizer)
            picked, used, truncated = extra + picked, used + extra_used, truncated or extra_cut
        shown_seqs = {t.seq for t in picked} | recalled
        return MemoryView(
            key=self.state.key,
            summary=part.summary,
            summary_tokens=part.summary_tokens,
            facts=self.facts,
            facts_tokens=self.facts_tokens,
            turns=tuple(picked),
            turns_tokens=used,
            dropped=sum(1 for t in turns if t.seq not in shown_seqs),
            truncated=truncated,
            version=self.state.version,
            recall=recall,
            recall_tokens=self.recall_tokens,
        )


def compose_parts(
    state: SummaryState,
    turns: Sequence[Turn],
    *,
    budget: int,
    tokenizer: Tokenizer,
    split: ViewSplit,
    facts_order: Callable[[Sequence[CarriedIdentifier]], Sequence[CarriedIdentifier]] = list,
    found: Recall = _NOTHING,
    nearby: Sequence[Turn] = (),
    part: Recent | None = None,
) -> Composed:
    """Summary, the newest of ``turns``, the identifiers and the recall ``found``, fitted
    into ``budget`` (see ``compose_view``, which is ``compose_parts(...).view(earlier)``).
    ``part``: ``recent_part`` of the same arguments, when the caller has it already."""
    budget = max(budget, 0)
    if part is None:
        part = recent_part(state, turns, budget, tokenizer, split)
    left = part.rest - part.used
    shown_text = "\n".join([part.summary, *(t.text for t in part.picked)])
    facts_room = min(split.facts_room(part.rest), left)
    facts, facts_tokens = fit_facts(facts_order(state.facts), shown_text, facts_room, tokenizer)
    left -= facts_tokens
    recall, recall_tokens = Recall(), 0
    if split.recall_tokens != 0:
        room = left if split.recall_tokens is None else min(left, split.recall_tokens)
        recall, recall_tokens = _recall(found, nearby, part.picked, room, tokenizer, split)
        left -= recall_tokens
    return Composed(state, turns, part, tuple(facts), facts_tokens, recall, recall_tokens, left,
                    max(int(budget * split.max_turn_share), 1), tokenizer)


def compose_view(
    state: SummaryState,
    turns: Sequence[Turn],
    *,
    budget: int,
    tokenizer: Tokenizer,
    split: ViewSplit,
    facts_order: Callable[[Sequence[CarriedIdentifier]], Sequence[CarriedIdentifier]] = list,
    found: Recall = _NOTHING,
    nearby: Sequence[Turn] = (),
    earlier: Sequence[Turn] = (),
) -> MemoryView:
    """Fit summary, the newest of ``turns`` (ascending, the trigger last), the carried
    identifiers (in ``facts_order``) and the recall ``found`` into ``budget`` tokens.

    ``found.turns`` are search hits, best first; ``nearby`` holds the stored turns around
    them (any order). Hits among the verbatim turns are skipped. ``earlier`` are stored
    (folded) turns just before ``turns``, ascending: what recall leaves unused goes to the
    newest of them, verbatim, after the older of ``turns``.
    """
    budget = max(budget, 0)
    if split.recall_tokens == 0:  # no recall: the plain window, facts by relevance
        return build_view(state, turns, budget=budget, tokenizer=tokenizer,
                          facts_budget=split.facts_tokens, max_turn_share=split.max_turn_share,
                          facts=facts_order(state.facts))
    return compose_parts(state, turns, budget=budget, tokenizer=tokenizer, split=split,
                         facts_order=facts_order, found=found, nearby=nearby).view(earlier)
