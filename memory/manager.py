"""``MemoryManager``: one per process; the one object ``bot/`` talks to about memory.

A facade over two parts, each a short read:

* ``memory.compaction`` — when a summary is written and why nothing is lost (single flight
  per channel, leases, backoff, the conditional commit);
* ``memory.archive`` — episodes and long-term facts: recall into a view, ``/remember``,
  ``/memory``, ``/forget``, retention.

What stays here is the reply path: ``record`` stores a turn durably before it returns and
then lets compaction look; ``amend`` stores what arrives for it later (its files), folded
or not; ``view`` reads the committed state and never awaits a
summarizer call. A view that cannot fit every unfolded turn drops the oldest from the
*prompt* only. ``digest`` (``/summary``) brings the summary up to date and stores nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from memory.aliases import Aliases
from memory.archive import Archive, ArchiveWithRetention, ForgetOutcome
from memory.compaction import CompactionStore, Compactor, fold_cost, late_turns
from memory.config import VIEW_TURN_LIMIT, MemoryConfig
from memory.embedding_indexer import EmbeddingIndexer
from memory.errors import CallRefused
from memory.models import (
    ChannelKey,
    ChannelStats,
    Episode,
    LongTermFact,
    MemoryView,
    NewTurn,
    RecordResult,
)
from memory.semantic import SemanticRecall
from memory.speakers import speaker_name
from memory.store import ChangeOutcome, ResetResult
from memory.summarizer import Summarizer
from memory.text import clean_text
from memory.tokens import Tokenizer
from memory.window import WindowPolicy, build_view, newest_that_fold

__all__ = ["Digest", "ManagerStore", "MemoryManager"]

log = logging.getLogger(__name__)


class ManagerStore(CompactionStore, ArchiveWithRetention, Protocol):
    """The roles the manager uses: compaction's and the archive's. It never opens, closes
    or ports a backend; whoever built the store does that."""


@dataclass(frozen=True, slots=True)
class Digest:
    """What ``/summary`` shows: the up-to-date summary text plus counts.

    ``fresh`` is false when the summary model failed and ``text`` is the stored summary;
    ``error`` is then what went wrong, so ``/summary`` can say it (unreachable, timed out,
    an unusable answer).
    ``episodes`` are the newest archived episodes the summary covers (newest first), so
    ``/summary`` can cite their time ranges.
    """

    text: str
    stats: ChannelStats
    fresh: bool
    empty: bool
    episodes: tuple[Episode, ...] = ()
    error: Exception | None = None


class MemoryManager:
    """Per-channel memory over a store; see the module docstring for what lives where."""

    def __init__(
        self,
        store: ManagerStore,
        summarizer: Summarizer,
        tokenizer: Tokenizer,
        policy: WindowPolicy | None = None,
        *,
        config: MemoryConfig | None = None,
        clock: Callable[[], float] = time.time,
        semantic: SemanticRecall | None = None,
        indexer: EmbeddingIndexer | None = None,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.tokenizer = tokenizer
        self.policy = policy or WindowPolicy()
        self.config = config or MemoryConfig()
        self.clock = clock
        self.indexer = indexer
        """Embeds recorded turns in the background (``EMBEDDING_MODEL``); None: off."""
        self.aliases = Aliases()
        self._warming: set[asyncio.Task[None]] = set()
        """Nicknames learned from the recorded messages, per channel (``memory.aliases``)."""
        self._archive = Archive(store, tokenizer, self.config, clock=clock, semantic=semantic,
                                aliases=self.aliases)
        self._compaction = Compactor(
            store, summarizer, self.policy, self._archive, self.config, clock=clock
        )
        # Backpressure on the record path: a burst parks here, not in the ready queue.
        self._admit = asyncio.Semaphore(self.config.max_inflight_records)

    @property
    def semantic(self) -> SemanticRecall | None:
        """Recall by meaning (``EMBEDDING_MODEL``), None when off."""
        return self._archive.semantic

    @property
    def compactions(self) -> int:
        """Summaries this process committed."""
        return self._compaction.compactions

    @property
    def compaction_failures(self) -> int:
        """Compaction attempts of this process that failed (and were retried)."""
        return self._compaction.compaction_failures

    def observe_compactions(self, callback: Callable[[str], None] | None) -> None:
        """Hear each compaction's outcome (``Compactor.on_outcome``): metrics, not logic."""
        self._compaction.on_outcome = callback

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Resume compaction for channels left overflowing; start retention if configured."""
        await self._compaction.resume()
        self._archive.start_retention()
        if self.indexer is not None:
            self.indexer.start(await self.store.channels())

    async def close(self, *, grace: float = 5.0) -> None:
        """Let running compactions finish within ``grace`` seconds, then cancel the rest.

        A cancelled compaction has committed nothing, so the old state stands.
        """
        retention = self._archive.stop_retention()
        for task in list(self._warming):
            task.cancel()
        await asyncio.gather(*self._warming, return_exceptions=True)
        if self.indexer is not None:
            await self.indexer.close()
        await self._compaction.close(grace=grace)
        if retention is not None:
            await asyncio.gather(retention, return_exceptions=True)

    async def wait_idle(self) -> None:
        """Wait until no compaction is running or scheduled and no alias learning is
        warming up (tests, shutdown, CLI)."""
        await asyncio.gather(*self._warming, return_exceptions=True)
        await self._compaction.wait_idle()

    # ------------------------------------------------------------------ reply path

    def prepare(self, turn: NewTurn) -> NewTurn:
        """Clean the text (NUL, lone surrogates) and count its tokens once, for the store."""
        text = clean_text(turn.text)
        name = speaker_name(clean_text(turn.author_name))
        return replace(turn, text=text, author_name=name, tokens=self.tokenizer.count(text))

    async def record(self, turn: NewTurn) -> RecordResult:
        """Store a turn durably (idempotent on message id) and schedule compaction if due.

        A turn that ``answers`` another is stored only while that one is, checked in the
        insert's transaction: ``AnsweredTurnGone`` when a reset or delete took it away."""
        async with self._admit:
            prepared = self.prepare(turn)
            result = await self.store.record(prepared)
        if result.created:
            self._learn_aliases(prepared, result.turn.seq)
        if self.indexer is not None and result.created and turn.role == "user":
            self.indexer.notify(turn.key)
        await self._compaction.recorded(turn.key, result)
        return result

    def _learn_aliases(self, turn: NewTurn, seq: int) -> None:
        """Feed a recorded turn to the alias learning; the first in a channel since the
        start also learns, in the background, from the turns stored before it."""
        if not self.aliases.known(turn.key) and seq > 1:
            task = asyncio.create_task(self.aliases.warm(turn.key, seq, self.store.turns_at))
            self._warming.add(task)
            task.add_done_callback(self._warmed)
        if turn.role == "user":
            self.aliases.learn(turn.key, turn.author_id, turn.author_name, turn.text)

    def _warmed(self, task: asyncio.Task[None]) -> None:
        self._warming.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("learning aliases failed: %r", task.exception())

    async def view(
        self,
        key: ChannelKey,
        budget: int,
        *,
        through_seq: int | None = None,
        recall: bool = False,
    ) -> MemoryView:
        """The committed memory that fits ``budget`` tokens; never waits for compaction.

        With ``recall`` the view is composed for the newest turn (``memory.view``): carried
        identifiers by relevance, and recall — long-term facts, episodes and the stored
        turns search finds for it — from the same budget.

        With ``through_seq`` the view is for that turn, which comes last even when
        compaction has folded it meanwhile (a late answer): it is read back by its seq and
        the summary stands for what came before it.
        """
        with self._compaction.views.viewing():  # background compaction waits for it
            state, turns = await self.store.snapshot(
                key, limit=VIEW_TURN_LIMIT, through_seq=through_seq
            )
            if through_seq is not None and (not turns or turns[-1].seq != through_seq):
                turns = [t for t in turns if t.seq < through_seq]
                turns += await self.store.turns_at(key, [through_seq])
            if recall and turns:
                return await self._archive.view(key, state, turns, budget)
        return build_view(
            state,
            turns,
            budget=budget,
            tokenizer=self.tokenizer,
            facts_budget=self.config.facts_tokens,
        )

    # ------------------------------------------------------------------ commands

    async def digest(self, key: ChannelKey, *, episodes: int = 3) -> Digest:
        """``/summary``: the summary brought up to date with unfolded turns; stores nothing.
        The request holds at most what one compaction folds (the newest turns), so it fits
        the model's context like a compaction's.

        Also returns the newest ``episodes`` archived episodes, for the "Earlier stretches" line.
        """
        state, turns = await self.store.snapshot(key, limit=VIEW_TURN_LIMIT)
        stats = await self.stats(key)
        if not state.text and not turns and not state.facts:
            return Digest("", stats, fresh=True, empty=True)
        cited = await self._archive.episodes(key, limit=episodes)
        # turns folded before their files were read, which the summary lacks
        bound = self.policy.max_fold_tokens
        late = late_turns(await self.store.amended(key), bound // 2)
        try:
            text = await self.summarizer.digest(
                state, [*late, *newest_that_fold(turns, bound - fold_cost(late))],
                max_tokens=self.summarizer.summary_tokens, key=key
            )
            return Digest(text, stats, fresh=True, empty=False, episodes=cited)
        except CallRefused:
            raise  # over a token limit: the caller says so, no stale summary instead
        except Exception as e:
            log.warning("digest for %s failed; showing the stored summary", key, exc_info=True)
            fallback = state.text or "\n".join(f"{t.author_name}: {t.text}" for t in turns[-10:])
            return Digest(fallback, stats, fresh=False, empty=False, episodes=cited, error=e)

    async def remember(self, key: ChannelKey, text: str, *, author: str = "") -> LongTermFact:
        """``/remember``: pin ``text`` as a long-term fact of the channel."""
        return await self._archive.remember(key, text, author=author)

    async def facts(self, key: ChannelKey, *, limit: int = 200) -> list[LongTermFact]:
        """``/memory``: the channel's long-term facts, newest first (superseded included)."""
        return await self._archive.facts(key, limit=limit)

    async def forget(self, key: ChannelKey, ref: str) -> ForgetOutcome:
        """``/forget``: delete the fact ``ref`` names (see ``Archive.forget``). Returns the
        deleted fact, the candidates when the text matches several (nothing deleted), or
        None when nothing matches."""
        return await self._archive.forget(key, ref)

    async def reset(self, key: ChannelKey) -> ResetResult:
        """Forget a channel. A compaction in flight is cancelled, and its commit would fail."""
        await self._compaction.cancel(key)
        return await self.store.reset(key)

    async def edit(self, key: ChannelKey, message_id: str, text: str) -> ChangeOutcome:
        """Apply a platform edit to an unfolded turn."""
        clean = clean_text(text)
        outcome = await self.store.edit(key, message_id, clean, self.tokenizer.count(clean))
        if outcome == "updated" and self.indexer is not None:
            self.indexer.notify(key)  # the edit dropped the turn's vector: embed the new text
        return outcome

    async def amend(self, key: ChannelKey, message_id: str, text: str) -> ChangeOutcome:
        """Store text that arrived for a recorded turn later (its files read): the turn's
        text becomes ``text`` whether or not compaction folded it meanwhile. A folded turn
        is searchable with it at once and queued for the next summary (``amended``); see
        ``MemoryStore.amend``."""
        clean = clean_text(text)
        outcome = await self.store.amend(key, message_id, clean, self.tokenizer.count(clean))
        if outcome in ("updated", "amended") and self.indexer is not None:
            self.indexer.notify(key)  # the new text dropped the turn's vector: embed it
        return outcome

    async def delete(self, key: ChannelKey, message_id: str) -> ChangeOutcome:
        """Apply a platform delete to an unfolded turn."""
        return await self.store.delete(key, message_id)

    async def stats(self, key: ChannelKey) -> ChannelStats:
        """Counts for the ``/summary`` footer, with the summary's token size filled in."""
        stats = await self.store.stats(key)
        state = await self.store.state(key, facts_limit=0)
        return replace(stats, summary_tokens=self.tokenizer.count(state.text))

    # ------------------------------------------------------------------ compaction

    def busy(self, key: ChannelKey) -> bool:
        """Whether a compaction is running or scheduled for ``key``."""
        return self._compaction.busy(key)

    async def compact_now(self, key: ChannelKey, *, force: bool = False) -> bool:
        """Compact ``key`` and wait (used when the model reports context overflow).

        With ``force`` the oldest half of the unfolded turns is folded even under the
        trigger. Returns whether a summary was committed.
        """
        return await self._compaction.compact_now(key, force=force)
