"""The archive: episodes and long-term facts, their recall into a view, and retention.

Every compaction commits, in the same transaction as the summary, an ``Episode`` (seq and
time range, speakers, the episode summary from the same summarizer call) and the long-term
facts the model extracted, which may supersede older ones (``memory.compaction``). This
module reads that archive back:

* **recall** — ``view(..., recall=True)`` composes the reply's memory (``memory.view``):
  the carried identifiers ranked by relevance to the triggering message, and what search
  finds for it — long-term facts, episodes and, above all, stored turns older than the
  verbatim ones (every turn stays searchable after compaction), each with its neighbours;
* **facts commands** — ``/remember`` pins a fact, ``/memory`` lists them, ``/forget``
  deletes the one its argument names (``12``/``#12`` by id, else by text);
* **retention** — with ``retention_days``, an hourly pass deletes folded turns and
  episodes older than that. Nothing else deletes stored turns except ``/reset``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeAlias

from memory.aliases import Aliases
from memory.config import VIEW_TURN_LIMIT, MemoryConfig
from memory.hops import (
    HOP_DOCS,
    HOP_FROM,
    HOP_LIMIT,
    HOPS,
    NAME_BATCH,
    NAME_DOCS,
    NAME_LIMIT,
    NAME_MIN_ROOM,
    after_sources,
    hop_terms,
    name_sources,
    name_terms,
    with_chains,
)
from memory.identifiers import contains_identifier
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    Episode,
    LongTermFact,
    MemoryView,
    NewLongTermFact,
    Recall,
    SummaryState,
    Turn,
)
from memory.ranking import Ranked, rank
from memory.recall import (
    QUERY_TURNS,
    asked,
    people_first,
    recall_query,
    turn_fallback_query,
    turn_query,
)
from memory.relevance import query_weights, rank_facts
from memory.search_text import query_terms
from memory.semantic import SemanticRecall
from memory.store import ArchiveStore
from memory.text import clean_text
from memory.tokens import Tokenizer
from memory.view import compose_parts, compose_view, recent_part, within_reach

__all__ = ["Archive", "ArchiveWithRetention", "ForgetOutcome", "match_facts"]

log = logging.getLogger(__name__)

STATED_HITS = 20
"""Turns searched for where a dropped identifier was stated (its rare terms rank it first)."""

ForgetOutcome: TypeAlias = LongTermFact | list[LongTermFact] | None
"""``/forget``: the deleted fact, the candidates when several match (none deleted), or None."""

FOLLOW_UP = 10
"""Matches of the best hit's own words placed right after it (``Archive._follow_up``):
enough to bring a two-step question's second message within reach, few enough not to
push one-step answers out (docs/decisions/0015)."""
FOLLOW_UP_DOCS = 500
"""The follow-up search uses only the best hit's words held by at most this many of the
searched turns: a word in thousands of turns does not lead to the second message of a
two-step question, and in a very long channel it makes the follow-up cost as much as the
search itself (docs/decisions/0015)."""
POOL = 450
"""Candidates a turn search returns at least, whatever the budget: enough for the ranking
(``memory.ranking``) to find, among a named speaker's turns, the one that answers."""
RETENTION_INTERVAL = 3600.0
_MAX_ID = 2**63 - 1  # the largest id SQLite INTEGER and PostgreSQL bigint hold
"""Seconds between retention passes."""


class ArchiveWithRetention(ArchiveStore, Protocol):
    """The archive role plus the one call retention needs (on ``MemoryStore``)."""

    async def purge_folded_before(self, cutoff: float) -> int:
        """Delete folded turns sent, and episodes ended, before ``cutoff``; how many turns."""


def match_facts(facts: Sequence[LongTermFact], ref: str) -> list[LongTermFact]:
    """The facts whose text is ``ref`` (case-insensitive), else those containing it."""
    low = ref.casefold()
    exact = [f for f in facts if f.text.casefold() == low]
    return exact or [f for f in facts if low in f.text.casefold()]


class Archive:
    """A channel's episodes and long-term facts: recall, the fact commands, retention."""

    def __init__(
        self,
        store: ArchiveWithRetention,
        tokenizer: Tokenizer,
        config: MemoryConfig,
        *,
        clock: Callable[[], float] = time.time,
        semantic: SemanticRecall | None = None,
        aliases: Aliases | None = None,
    ) -> None:
        self.store = store
        self.tokenizer = tokenizer
        self.config = config
        self.clock = clock
        self.semantic = semantic
        """Recall by meaning too (``EMBEDDING_MODEL``); None: by words only."""
        self._retention: asyncio.Task[None] | None = None
        self.aliases = aliases or Aliases()
        """Nicknames a turn search adds to the names it is asked about (``memory.aliases``)."""

    # ------------------------------------------------------------------ recall

    async def view(
        self, key: ChannelKey, state: SummaryState, turns: Sequence[Turn], budget: int
    ) -> MemoryView:
        """The reply's memory for the newest of ``turns``, composed within ``budget``."""
        split = self.config.split
        # The words as search sees them: without the mention and the bot's names, or
        # "@gistbot" makes the bot's own carried lines ("gistbot: To recap…") the best match.
        said = asked(list(turns)[-(QUERY_TURNS + 1):])
        weights = query_weights(said[0], said[1:])

        def order(facts: Sequence[CarriedIdentifier]) -> list[CarriedIdentifier]:
            return rank_facts(facts, weights)

        if split.recall_tokens == 0:
            return compose_view(state, turns, budget=budget, tokenizer=self.tokenizer,
                                split=split, facts_order=order)
        part = recent_part(state, turns, max(budget, 0), self.tokenizer, split)
        below = part.first_seq
        # The archive search and the turn search are independent reads: at once, they take
        # the longer one's time, not the sum (two reader connections on SQLite, two pooled
        # ones on PostgreSQL; docs/decisions/0016).
        # (gather: a failure propagates as itself; the other read ends on its own.)
        found, (hits, nearby) = await asyncio.gather(
            self.store.search(
                key,
                recall_query(turns),
                facts_limit=self.config.recall_facts,
                episodes_limit=self.config.recall_episodes,
            ),
            self._recall_turns(key, turns, below, budget, part.rest - part.used),
        )
        recalled = Recall(found.facts, found.episodes, tuple(hits))
        composed = compose_parts(state, turns, budget=budget, tokenizer=self.tokenizer,
                                 split=split, facts_order=order, found=recalled,
                                 nearby=[*hits, *nearby], part=part)
        view = composed.view()
        left = budget - view.tokens
        first = view.turns[0].seq if view.turns else None
        if left > budget // 10 and first is not None and first > 1:
            # Little matched: fill the rest with the conversation just before, verbatim
            # (the recall is not weighed again).
            count = min(left // 12, VIEW_TURN_LIMIT)
            earlier = await self.store.turns_at(key, range(max(first - count, 1), first))
            view = composed.view(earlier)
        return view

    async def _recall_turns(
        self, key: ChannelKey, turns: Sequence[Turn], below: int | None, budget: int, room: int
    ) -> tuple[list[Turn], list[Turn]]:
        """The stored turns before ``below`` that best match the newest of ``turns`` (the
        store's lexical order and, with semantic recall, the nearest turns in meaning,
        fused by ``ranking.rank``), and the neighbours (±1) that are not matches themselves
        of those a recall room of at most ``room`` tokens could show
        (``view.within_reach``)."""
        if below is None or below <= 1:
            return [], []
        # Enough candidates to fill the recall room with short messages (~20 tokens each;
        # docs/decisions/0015).
        limit = max(self.config.recall_turns, budget // 20, POOL)
        query = self.aliases.expand(key, turn_query(turns))
        hits, near = await asyncio.gather(
            self.store.search_turns(key, query, before_seq=below, limit=limit,
                                    fallback=turn_fallback_query(turns, query)),
            self._nearest(key, turns, below),
        )
        hits = await self._follow_up(key, query, people_first(hits), below)
        # Semantic recall's one step: its nearest turns are one more list of the fusion.
        extra = [Ranked(near, self.semantic.weight)] if near and self.semantic else []
        # Multi-hop: what the best word matches say leads to more turns, placed right
        # after the match that led to them (docs/decisions/0037).
        hits = after_sources(hits, await self._hops(key, query, hits, below))
        hits = rank(hits, turns[-(QUERY_TURNS + 1):], extra=extra)
        hits = await self._names(key, query, hits, below, room)
        shown = hits[: within_reach(hits, room, self.config.split)]
        around = {h.seq + d for h in shown for d in (-1, 1)} - {h.seq for h in hits}
        nearby = await self.store.turns_at(key, sorted(s for s in around if 0 < s < below))
        return hits, nearby

    async def _hops(
        self, key: ChannelKey, query: Sequence[str], hits: Sequence[Turn], below: int
    ) -> dict[int, list[Turn]]:
        """What ``HOPS`` rounds of searching again find (``memory.hops``), by the seq of the
        turn whose words found them: each round searches, once per source, with the words
        of the ``HOP_FROM`` best turns of the round before (the first: the best word
        matches, ``hits``) that no round used yet, bounded to words ``HOP_DOCS`` turns hold
        at most."""
        used = set(query)
        sources: Sequence[Turn] = [t for t in hits if t.role != "assistant"][:HOP_FROM]
        seen = {t.seq for t in sources}  # a turn follows one source only
        led: dict[int, list[Turn]] = {}
        for _ in range(HOPS):
            # One search per source: a search keeps only its rarest few words, and one
            # message's number would crowd out another's names.
            asks = [(t, w) for t in sources if (w := hop_terms([t], used))]
            if not asks:
                break
            rounds = await asyncio.gather(*(
                self.store.search_turns(key, w, before_seq=below, limit=HOP_LIMIT,
                                        max_docs=HOP_DOCS) for _, w in asks))
            nxt: list[Turn] = []
            for (source, _), found in zip(asks, rounds, strict=True):
                new = [t for t in found if t.seq not in seen]
                seen.update(t.seq for t in new)
                led[source.seq] = new
                nxt += [t for t in new if t.role != "assistant"]
            sources = nxt[:HOP_FROM]
        return led

    async def _names(
        self, key: ChannelKey, query: Sequence[str], hits: list[Turn], below: int, room: int
    ) -> list[Turn]:
        """``hits`` (ranked) with the other turns that name what the best of them name
        (``hops.name_terms`` and each name's other forms, ``Aliases.variants``; names at
        most ``NAME_DOCS`` turns hold) right after the first turn naming it
        (``hops.with_chains``)."""
        if room < NAME_MIN_ROOM:
            return hits
        names = name_terms(name_sources(hits, room), set(query),
                           lambda word: self.aliases.named(key, word))
        for name, source in list(names.items()):
            for other in self.aliases.variants(key, name):
                names.setdefault(other, source)
        words = list(names)
        rounds = await asyncio.gather(*(
            self.store.search_turns(key, words[i : i + NAME_BATCH], before_seq=below,
                                    limit=NAME_LIMIT * NAME_BATCH, max_docs=NAME_DOCS)
            for i in range(0, len(words), NAME_BATCH)))
        return with_chains(hits, names, [t for found in rounds for t in found], room)

    async def _nearest(self, key: ChannelKey, turns: Sequence[Turn], below: int) -> list[Turn]:
        """The stored turns before ``below`` closest in meaning to the newest of ``turns``
        (its text as search sees it: no mentions, no bot names); none without
        ``EMBEDDING_MODEL`` or when the message could not be embedded in time."""
        if self.semantic is None:
            return []
        message = asked(list(turns)[-(QUERY_TURNS + 1):])[0]
        return await self.semantic.nearest(key, message, before_seq=below)

    async def _follow_up(
        self, key: ChannelKey, query: Sequence[str], hits: list[Turn], below: int
    ) -> list[Turn]:
        """``hits`` with, right after the best one, the ``FOLLOW_UP`` best matches of that
        hit's own words (those not in ``query``): a question that takes two steps ("the
        vessel Dave sails on in the regatta" → "dad wants me to crew on his boat for the
        regatta" → "my dad bought a sailboat and named it …") shares no word with the
        second message, but the first does (pseudo-relevance feedback;
        docs/decisions/0015)."""
        if not hits:
            return hits
        asked = set(query)
        words = [t for t in query_terms(hits[0].text) if t not in asked]
        if not words:
            return hits
        more = await self.store.search_turns(key, words, before_seq=below, limit=FOLLOW_UP,
                                             max_docs=FOLLOW_UP_DOCS)
        merged = {t.seq: t for t in [hits[0], *more, *hits[1:]]}  # first place kept
        return list(merged.values())

    async def related_facts(self, key: ChannelKey, turns: Sequence[Turn]) -> Sequence[LongTermFact]:
        """Current facts that share terms with ``turns``, so a fold can mark one replaced."""
        known = await self.store.search(
            key,
            query_terms(*(t.text for t in turns)),
            facts_limit=10,
            episodes_limit=0,
            include_superseded=False,
        )
        return known.facts

    async def stated(
        self, key: ChannelKey, values: Sequence[str], *, before_seq: int
    ) -> dict[str, Turn]:
        """The first stored people's turn before ``before_seq`` that states each of
        ``values`` (an identifier the summary held and has now dropped: where it came
        from, so the carried fact keeps its turn and speaker; ``memory.compaction``).
        Values search does not find are left out."""
        out: dict[str, Turn] = {}
        for value in values:
            hits = await self.store.search_turns(key, query_terms(value), before_seq=before_seq,
                                                 limit=STATED_HITS)
            said = [t for t in hits if t.role != "assistant" and contains_identifier(t.text, value)]
            if said:
                out[value] = min(said, key=lambda t: t.seq)
        return out

    async def episodes(self, key: ChannelKey, *, limit: int) -> tuple[Episode, ...]:
        """The newest ``limit`` episodes, newest first (what ``/summary`` cites)."""
        return tuple(await self.store.episodes(key, limit=limit)) if limit > 0 else ()

    # ------------------------------------------------------------------ fact commands

    async def remember(self, key: ChannelKey, text: str, *, author: str = "") -> LongTermFact:
        """``/remember``: pin ``text`` as a long-term fact of the channel."""
        clean = clean_text(text).strip()
        if not clean:
            raise ValueError("nothing to remember")
        fact = NewLongTermFact(clean, (), author=clean_text(author), pinned=True)
        return await self.store.add_fact(key, fact, now=self.clock())

    async def facts(self, key: ChannelKey, *, limit: int = 200) -> list[LongTermFact]:
        """``/memory``: the channel's long-term facts, newest first (superseded included)."""
        return await self.store.list_facts(key, limit=limit)

    async def forget(self, key: ChannelKey, ref: str) -> ForgetOutcome:
        """``/forget``: delete the fact ``ref`` names — ``12``/``#12`` by id, else the one
        fact whose text matches (exactly, else as a substring, else by search terms).

        Several matches delete nothing: the user picks one by id.
        """
        ref = ref.strip()
        digits = ref.removeprefix("#")
        # ASCII only: str.isdigit() accepts "²" and other digits int() refuses. An id past
        # both backends' 64-bit integer names no fact (and would overflow the query).
        if digits.isascii() and digits.isdigit():
            fact_id = int(digits)
            return await self.store.delete_fact(key, fact_id) if fact_id <= _MAX_ID else None
        if not ref:
            return None
        matches = match_facts(await self.store.list_facts(key, limit=1000), ref)
        if not matches:
            found = await self.store.search(key, query_terms(ref), facts_limit=2, episodes_limit=0)
            matches = list(found.facts)
        if len(matches) != 1:
            return matches or None
        return await self.store.delete_fact(key, matches[0].id)

    # ------------------------------------------------------------------ retention

    def start_retention(self) -> None:
        """Start the hourly retention pass if ``retention_days`` is set."""
        if self.config.retention_days:
            self._retention = asyncio.create_task(self._retention_loop(), name="gistbot-retention")

    def stop_retention(self) -> asyncio.Task[None] | None:
        """Cancel the retention pass, which keeps no state; the caller awaits the task."""
        task, self._retention = self._retention, None
        if task is not None:
            task.cancel()
        return task

    async def _retention_loop(self) -> None:
        days = self.config.retention_days
        assert days
        while True:
            cutoff = self.clock() - days * 86400
            try:
                n = await self.store.purge_folded_before(cutoff)
                if n:
                    log.info("retention: deleted %d folded turns older than %.0f days", n, days)
            except Exception:
                log.warning("retention pass failed; will try again", exc_info=True)
            await asyncio.sleep(RETENTION_INTERVAL)
