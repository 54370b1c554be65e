"""Retrieval for a reply: pick the archive items that fit ``RECALL_TOKENS`` and render them.

The three levels of memory: recent turns (verbatim), the rolling summary (the gist), and
the archive of episodes and long-term facts, which the summary may have lost. On every
reply the triggering message plus the last few turns are turned into search terms
(``memory.search_text``); the store ranks the channel's facts and episodes (BM25 on SQLite,
``ts_rank`` on PostgreSQL); this module keeps the best that fit the recall budget — facts
first (current before superseded), then episodes — and renders each as one line. The
prompt shows them inside the same untrusted-data fence as the summary; a superseded fact
is shown as such, so the model sees both the old and the new value and which one holds.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache

from memory.models import Episode, LongTermFact, Recall, Turn
from memory.relative_dates import dated
from memory.search_text import query_terms
from memory.speakers import speaker_name
from memory.tokens import Tokenizer

__all__ = [
    "QUERY_TURNS",
    "RECALL_HEADING",
    "TURNS_HEADING",
    "asked",
    "day_heading",
    "episode_line",
    "episode_span",
    "episode_spans",
    "fact_line",
    "fit_recall",
    "people_first",
    "recall_query",
    "recalled_line",
    "recalled_turn_line",
    "render_recalled_turns",
    "turn_fallback_query",
    "turn_query",
]

RECALL_HEADING = "## Recalled from the archive (older details that may matter here)"
TURNS_HEADING = "## Earlier messages that match this one (verbatim, oldest first)"
QUERY_TURNS = 3
"""Turns before the triggering message whose words also select what is recalled."""
_LINE_OVERHEAD = 1


def people_first(hits: Sequence[Turn]) -> list[Turn]:
    """Search hits with people's messages first, the bot's own replies after them (each
    group in its ranked order). What people said is the evidence; a reply only restates it,
    and a weak model's replies (the same copied line at the top of each) match every
    question that shares their words, so they are recalled only into room people's
    messages left."""
    return [t for t in hits if t.role != "assistant"] + [t for t in hits if t.role == "assistant"]


_MENTION = re.compile(r"(?<![\w@])@\u2060?[^\W_][\w.\-]*")


def asked(turns: Sequence[Turn]) -> list[str]:
    """The texts of ``turns`` as a search sees them, newest first: without mentions
    (``@name``, as the adapters store them) and without the names of the bot (the
    authors of the replies among ``turns``). "@gistbot when is the retro?" is about the
    retro; the bot's name would match every turn that addressed it."""
    return list(_asked(tuple((t.role, t.author_name, t.text) for t in turns)))


@lru_cache(maxsize=64)
def _asked(said: tuple[tuple[str, str, str], ...]) -> tuple[str, ...]:
    """``asked`` of turns given as (role, author name, text): remembered, because one
    reply's view asks it of the same few turns for each of its queries and the ranking."""
    names = {n.casefold() for role, author, _ in said if role == "assistant"
             for n in author.split()}
    bot = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b",
                     re.IGNORECASE) if names else None
    out = []
    for _, _, text in reversed(said):
        text = _MENTION.sub(" ", text)
        out.append(bot.sub(" ", text) if bot is not None else text)
    return tuple(out)


def recall_query(turns: Sequence[Turn]) -> list[str]:
    """Search terms for a reply: the newest turn (the trigger) first, then the few before."""
    return query_terms(*asked(list(turns)[-(QUERY_TURNS + 1) :]))


def turn_query(turns: Sequence[Turn]) -> list[str]:
    """Search terms for stored turns: the triggering message's own; the turns before it
    only when the message has too few terms to search with ("and the other one?")."""
    recent = asked(list(turns)[-(QUERY_TURNS + 1) :])
    own = query_terms(recent[0]) if recent else []
    if len(own) >= 3:
        return own
    return query_terms(*recent)


def turn_fallback_query(turns: Sequence[Turn], query: Sequence[str] | None = None) -> list[str]:
    """The terms that order the stored turns ``turn_query``'s telling terms did not match
    (``ArchiveStore.search_turns``' ``fallback``): the triggering message's every word,
    the common ones too, then ``turn_query``'s. A paraphrased question ("What does Dave
    normally get at the coffee shop?") may share only those with the message it asks about
    ("My usual order at the café is …"); BM25 weighs them by rarity. ``query``: the
    ``turn_query`` of ``turns`` when the caller has it already."""
    recent = asked(list(turns)[-(QUERY_TURNS + 1) :])
    own = query_terms(recent[0], common=True) if recent else []
    return list(dict.fromkeys([*own, *(turn_query(turns) if query is None else query)]))


def episode_span(episode: Episode, now: float | None = None) -> str:
    """``3 Mar 10:02–10:40`` (UTC); a second date when it spans days, and the year when it
    is not the year of ``now`` (default: the current time): ``3 Mar 2025 10:02–10:40``."""
    start = datetime.fromtimestamp(episode.started_at, UTC)
    end = datetime.fromtimestamp(episode.ended_at, UTC)
    this_year = datetime.fromtimestamp(time.time() if now is None else now, UTC).year

    def day(d: datetime) -> str:
        return f"{d.day} {d:%b}" + (f" {d.year}" if d.year != this_year else "")

    if start.date() == end.date():
        return f"{day(start)} {start:%H:%M}–{end:%H:%M}"
    return f"{day(start)} {start:%H:%M}–{day(end)} {end:%H:%M}"


def episode_spans(episodes: Sequence[Episode], now: float | None = None) -> str:
    """The spans of ``episodes`` for ``/summary``'s "Earlier stretches" line, in the given order,
    identical spans merged (``3 Mar 10:02–10:40 (×2)``), comma-separated."""
    counts: dict[str, int] = {}
    for episode in episodes:
        span = episode_span(episode, now)
        counts[span] = counts.get(span, 0) + 1
    return ", ".join(span if n == 1 else f"{span} (×{n})" for span, n in counts.items())


def fact_line(fact: LongTermFact) -> str:
    """One fact as the prompt and ``/memory`` show it, superseded ones marked."""
    if fact.superseded_by is not None:
        return f"- [fact #{fact.id}, SUPERSEDED by #{fact.superseded_by}: outdated] {fact.text}"
    return f"- [fact #{fact.id}] {fact.text}"


def episode_line(episode: Episode) -> str:
    """One episode: when, who, what happened."""
    who = ", ".join(episode.speakers)
    return f"- [episode {episode_span(episode)} · {who}] {episode.text}"


def day_heading(turn: Turn) -> str:
    """The date line above a day's recalled messages (UTC, with the year)."""
    return _day_heading(int(turn.sent_at // 86400))


@lru_cache(maxsize=4096)
def _day_heading(day: int) -> str:
    """Remembered by the UTC day's number (POSIX days are 86,400 s): a view asks for the
    heading of each of its ~300 candidates, and a ``Turn`` is slow to hash."""
    d = datetime.fromtimestamp(day * 86400, UTC)
    return f"### {d.day} {d:%b %Y}"


def recalled_turn_line(turn: Turn) -> str:
    """One recalled message: speaker and text on one line (its line breaks folded), under
    its day's heading, then what its relative dates mean ("last Tuesday = 14 May",
    ``memory.relative_dates``). No time of day: "- 13:29 " costs 5 tokens a line, a third
    of a short message, and a question about an old message asks for its day
    (docs/decisions/0014)."""
    folded = " ".join(turn.text.split())
    return recalled_line(turn.role, turn.author_name, folded) + dated(folded, turn.sent_at)


def recalled_line(role: str, author_name: str, folded: str) -> str:
    """``recalled_turn_line`` of a turn whose text, its whitespace folded, is ``folded``
    (a view has folded it already to find repeats)."""
    return f"- {_speaker(role, author_name)}: {folded}"


@lru_cache(maxsize=4096)
def _speaker(role: str, author_name: str) -> str:
    name = speaker_name(author_name) or "someone"
    return f"{name} (bot)" if role == "assistant" else name


def render_recalled_turns(turns: Sequence[Turn]) -> list[str]:
    """The recalled messages under their heading, grouped by day (each day once, oldest
    first), in conversation order within a day."""
    if not turns:
        return []
    lines = [TURNS_HEADING]
    by_day: dict[str, list[Turn]] = {}
    for turn in sorted(turns, key=lambda t: (t.sent_at, t.seq)):
        by_day.setdefault(day_heading(turn), []).append(turn)
    # Each day once (a view pays for each day's heading once, whatever the seq order).
    for heading, day in by_day.items():
        lines.append(heading)
        lines += [recalled_turn_line(t) for t in sorted(day, key=lambda t: t.seq)]
    return lines


def fit_recall(recall: Recall, budget: int, tokenizer: Tokenizer) -> tuple[Recall, int]:
    """The items of ``recall`` that fit ``budget`` tokens with the heading, and their cost
    (0 when nothing fits: then no heading is shown either)."""
    if budget <= 0 or (not recall.facts and not recall.episodes):
        return Recall(), 0
    used = tokenizer.count(RECALL_HEADING) + _LINE_OVERHEAD
    facts: list[LongTermFact] = []
    episodes: list[Episode] = []
    for fact in recall.facts:
        cost = tokenizer.count(fact_line(fact)) + _LINE_OVERHEAD
        if used + cost <= budget:
            facts.append(fact)
            used += cost
    for episode in recall.episodes:
        cost = tokenizer.count(episode_line(episode)) + _LINE_OVERHEAD
        if used + cost <= budget:
            episodes.append(episode)
            used += cost
    if not facts and not episodes:
        return Recall(), 0
    return Recall(tuple(facts), tuple(episodes)), used
