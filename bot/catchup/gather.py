"""``/catchup`` and digests: what happened in a channel (and its threads) over a period,
every point linked to the messages it rests on.

``Catchup.run`` gathers the period's human messages by send time (the channel and each
thread the adapter names) and numbers them 1..N. A short period is one model call; a long
one is a bounded map-reduce, never one giant prompt: consecutive stretches that each fit
a prompt (past ``max_map_calls``, that many stretches, each given the archive's episodes
over it and its most informative messages), ``parallel`` map calls at a time, their
points merged by reduce calls. So calls and time stay bounded whatever the period, and
every prompt is counted against the budget's ``prompt_tokens``.

Citations are checked after every call (``bot.catchup.citations.check_bullets``): a point keeps
only citations to messages of its own input and is dropped if none is left or it names an
identifier none of them contains. Offline or when the model fails, the points are
extractive (each stretch's most informative message, quoted, with citations). The answer:
a heading with the period and message count, the linked points, the most active people.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from zoneinfo import ZoneInfo

from bot.catchup.citations import (
    Bullet,
    Linker,
    Numbered,
    check_bullets,
    number_turns,
    parse_bullets,
)
from bot.catchup.citations import render as render_bullets
from bot.catchup.text import (
    extractive_bullets,
    heading,
    map_messages,
    most_active,
    prompt_lines,
    reduce_messages,
    salience,
)
from bot.errors import LLMError
from bot.llm.client import LLM
from bot.settings.sections import BudgetSettings, CatchupSettings
from memory.catchup_store import CatchupStore
from memory.completion import ChatMessage
from memory.models import ChannelKey, Episode, Turn
from memory.tokens import Tokenizer

__all__ = ["Catchup", "CatchupResult", "CatchupSource", "Limits", "Period", "Scope",
           "SectionLimits"]

log = logging.getLogger(__name__)
UTC_ZONE = ZoneInfo("UTC")
LINE_OVERHEAD = 14  # tokens of "[n] Mon 14:02 Name (thread x): " beyond the text, estimated


class CatchupSource(CatchupStore, Protocol):
    """The store roles a catch-up reads: turns by time and the archive's episodes."""

    async def episodes(self, key: ChannelKey, *, limit: int = 20) -> list[Episode]:
        """The channel's newest episodes, newest first."""


@dataclass(frozen=True, slots=True)
class Period:
    """``[start, end)`` in unix seconds, and how the heading names it."""

    start: float
    end: float
    label: str


@dataclass(frozen=True, slots=True)
class Scope:
    """The channel and the threads of it to include (thread key → name)."""

    key: ChannelKey
    threads: Mapping[ChannelKey, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CatchupResult:
    """The rendered text and what it rests on (for tests and digests)."""

    text: str
    count: int
    bullets: tuple[Bullet, ...] = ()
    numbered: Mapping[int, Turn] = field(default_factory=dict)
    links: Mapping[Turn, str] = field(default_factory=dict)
    calls: int = 0
    max_prompt_tokens: int = 0
    note: str = ""
    refused: bool = False  # the reader may not read the channel (``bot.catchup.visibility``)

    @property
    def empty(self) -> bool:
        """Nothing was said in the period (or nothing of it may be shown)."""
        return self.count == 0


class Limits(Protocol):
    """What a catch-up may spend: a prompt holds at most ``prompt_tokens``, an answer uses at
    most ``reply_tokens`` (the shared ``bot.conversation.budget.Budget`` is one)."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def reply_tokens(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SectionLimits:
    """The limits a budget section sets by itself (when no shared budget is handed in)."""

    section: BudgetSettings = field(default_factory=BudgetSettings)

    @property
    def prompt_tokens(self) -> int:
        """The context less the reply's share."""
        return self.section.context_tokens - self.section.reply_tokens

    @property
    def reply_tokens(self) -> int:
        """The reply's share."""
        return self.section.reply_tokens


class Catchup:
    """Makes catch-ups; one per process (stateless between calls). ``parallel`` map calls
    run at once; each prompt holds at most ``budget.prompt_tokens``."""

    def __init__(self, store: CatchupSource, llm: LLM, tokenizer: Tokenizer,
                 config: CatchupSettings | None = None, budget: Limits | None = None, *,
                 parallel: int = 8) -> None:
        self.store = store
        self.llm = llm
        self.tokenizer = tokenizer
        self.config = config or CatchupSettings()
        self.limits: Limits = budget or SectionLimits()
        self.parallel = parallel

    @property
    def budget(self) -> int:
        """Tokens one prompt may hold (the reply's share kept free)."""
        return self.limits.prompt_tokens

    async def gather(self, scope: Scope, period: Period) -> list[Numbered]:
        """The period's human messages in the channel and its threads, numbered."""
        keys = [scope.key, *scope.threads]
        found = await asyncio.gather(*(
            self.store.turns_between(k, period.start, period.end,
                                     limit=self.config.max_messages) for k in keys))
        turns = [t for batch in found for t in batch if t.role == "user"]
        names = {k.channel: name or k.channel for k, name in scope.threads.items()}
        return number_turns(turns, names)

    async def run(self, scope: Scope, period: Period, linker: Linker, *,
                  zone: ZoneInfo = UTC_ZONE, title: str = "Catch-up") -> CatchupResult:
        """The catch-up of ``scope`` over ``period``, rendered (see the module docstring)."""
        items = await self.gather(scope, period)
        head = heading(title, period.start, period.end, period.label, items, zone)
        if not items:
            return CatchupResult(f"{head}\n\nNothing was said here in that period.", 0)
        run = _Run(self, scope, items, zone)
        bullets = await run.points()
        numbered = {i.n: i.turn for i in items}
        cited = [numbered[n] for b in bullets for n in b.cites]
        links = await linker(list(dict.fromkeys(cited)))
        body = (render_bullets(bullets, numbered, links, zone)
                or "(no point could be backed by a message)")
        note = f"\n_{run.note}_" if run.note else ""
        text = f"{head}\n\n{body}{note}\n\n{most_active(items)}"
        return CatchupResult(text, len(items), tuple(bullets), numbered, links, run.calls,
                             run.max_prompt, run.note)


class _Run:
    """One catch-up's model calls: direct, or map then reduce; counts calls and prompt size."""

    def __init__(self, owner: Catchup, scope: Scope, items: Sequence[Numbered],
                 zone: ZoneInfo) -> None:
        self.o, self.scope, self.items, self.zone = owner, scope, items, zone
        self.config = owner.config
        self.calls = 0
        self.max_prompt = 0
        self.note = ""
        self._slots = asyncio.Semaphore(owner.parallel)

    async def points(self) -> list[Bullet]:
        """The checked points of the period."""
        if self.o.llm.is_offline:
            return extractive_bullets(self.items, self.config.bullets)
        stretches = await self._stretches()
        if len(stretches) == 1:
            lines, allowed, episodes = stretches[0]
            got = await self._map(lines, allowed, episodes, self.config.bullets)
            return got or self._fallback(self.items)
        per = max(3, self.config.bullets)
        results = await asyncio.gather(
            *(self._map(lines, allowed, eps, per) for lines, allowed, eps in stretches))
        points: list[Bullet] = []
        for got, (_, allowed, _) in zip(results, stretches, strict=True):
            if not got:
                got = self._fallback([i for i in self.items if i.n in allowed])
            points.extend(got)
        return await self._reduce(points)

    # ------------------------------------------------------------------ splitting

    def _cost(self, item: Numbered) -> int:
        return min(item.turn.tokens, 400) + LINE_OVERHEAD + len(item.turn.author_name) // 3

    def _room(self, bullets: int) -> int:
        """Tokens left for lines in a map prompt (instructions and a margin paid)."""
        return int(self.o.budget * 0.9) - 250 - 8 * bullets

    async def _stretches(self) -> list[tuple[list[str], dict[int, Turn], list[Episode]]]:
        room = self._room(self.config.bullets)
        chunks: list[list[Numbered]] = [[]]
        used = 0
        for item in self.items:
            cost = self._cost(item)
            if chunks[-1] and used + cost > room:
                chunks.append([])
                used = 0
            chunks[-1].append(item)
            used += cost
        if len(chunks) <= self.config.max_map_calls:
            return [self._stretch(c, []) for c in chunks]
        episodes = [
            e for e in await self.o.store.episodes(self.scope.key, limit=self.config.episodes_scan)
            if e.ended_at >= self.items[0].turn.sent_at
            and e.started_at <= self.items[-1].turn.sent_at
        ]
        # Ranking tens of thousands of messages is CPU work: off the event loop.
        return await asyncio.to_thread(
            self._compressed, room, sorted(episodes, key=lambda e: e.started_at))

    def _stretch(self, chunk: Sequence[Numbered],
                 episodes: list[Episode]) -> tuple[list[str], dict[int, Turn], list[Episode]]:
        lines = prompt_lines(chunk, self.zone)
        return lines, {i.n: i.turn for i in chunk}, episodes

    def _compressed(self, room: int, archive: list[Episode],
                    ) -> list[tuple[list[str], dict[int, Turn], list[Episode]]]:
        """``max_map_calls`` equal stretches, each: overlapping episodes + best messages."""
        n = self.config.max_map_calls
        size = -(-len(self.items) // n)
        out = []
        for start in range(0, len(self.items), size):
            chunk = list(self.items[start:start + size])
            first, last = chunk[0].turn.sent_at, chunk[-1].turn.sent_at
            episodes = [e for e in archive if e.ended_at >= first and e.started_at <= last][:6]
            left = room - sum(self.o.tokenizer.count(e.text) + 4 for e in episodes)
            out.append(self._stretch(self._salient(chunk, left), episodes))
        self.note = (f"{len(self.items):,} messages: summarized from the archive and the "
                     f"{sum(len(s[0]) for s in out):,} most informative messages")
        return out

    def _salient(self, chunk: Sequence[Numbered], room: int) -> list[Numbered]:
        """The most informative messages of ``chunk`` that fit ``room`` tokens, in order."""
        ranked = sorted(chunk, key=lambda i: -salience(i.turn.text))
        picked, used = [], 0
        for item in ranked:
            cost = self._cost(item)
            if used + cost <= room:
                picked.append(item)
                used += cost
        return sorted(picked, key=lambda i: i.n)

    # ------------------------------------------------------------------ calls

    async def _call(self, messages: list[ChatMessage]) -> str | None:
        prompt = sum(self.o.tokenizer.count(m["content"]) + 4 for m in messages)
        if prompt > self.o.budget:  # estimated packing overshot: never send it
            log.warning("catch-up prompt of %d tokens over %d; not sent", prompt, self.o.budget)
            return None
        async with self._slots:
            self.calls += 1
            self.max_prompt = max(self.max_prompt, prompt)
            try:
                done = await self.o.llm.complete(
                    messages, max_tokens=self.o.limits.reply_tokens, purpose="digest")
            except LLMError as e:
                log.warning("catch-up call failed: %s", e)
                self.note = "The model failed; some points are quoted from the messages."
                return None
        return done.text

    async def _map(self, lines: list[str], allowed: dict[int, Turn], episodes: list[Episode],
                   bullets: int) -> list[Bullet] | None:
        messages = map_messages(lines, episodes, bullets)
        while len(lines) > 1 and self._size(messages) > self.o.budget:
            lines = lines[: len(lines) * 9 // 10]  # the estimate was short: shed the tail
            messages = map_messages(lines, episodes, bullets)
        answer = await self._call(messages)
        if answer is None:
            return None
        shown = {int(line[1:line.index("]")]) for line in lines}  # only what the call saw
        return check_bullets(parse_bullets(answer), {n: allowed[n] for n in shown})

    def _size(self, messages: list[ChatMessage]) -> int:
        return sum(self.o.tokenizer.count(m["content"]) + 4 for m in messages)

    async def _reduce(self, points: list[Bullet]) -> list[Bullet]:
        """Merge points into ``bullets`` points; a tree of calls when they do not fit one."""
        numbered = {i.n: i.turn for i in self.items}
        rounds = 0
        while len(points) > self.config.bullets and rounds < 4:
            rounds += 1
            groups = self._groups(points)
            merged = await asyncio.gather(*(self._merge(g, numbered) for g in groups))
            points = [p for group in merged for p in group]
            if len(groups) == 1:
                break
        return points[: self.config.bullets * 2]

    def _groups(self, points: list[Bullet]) -> list[list[Bullet]]:
        room = int(self.o.budget * 0.9) - 200
        groups: list[list[Bullet]] = [[]]
        used = 0
        for p in points:
            cost = self.o.tokenizer.count(p.text) + 3 * len(p.cites) + 4
            if groups[-1] and used + cost > room:
                groups.append([])
                used = 0
            groups[-1].append(p)
            used += cost
        return groups

    async def _merge(self, group: list[Bullet], numbered: Mapping[int, Turn]) -> list[Bullet]:
        answer = await self._call(reduce_messages(group, self.config.bullets))
        if answer is None:
            return group[: self.config.bullets]
        allowed = {n: numbered[n] for p in group for n in p.cites}
        merged = check_bullets(parse_bullets(answer), allowed)
        return merged or group[: self.config.bullets]

    def _fallback(self, items: Sequence[Numbered]) -> list[Bullet]:
        if not self.note:
            self.note = "The model's answer had no usable points; these are quoted."
        return extractive_bullets(items, self.config.bullets)

