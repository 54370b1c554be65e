"""``MemoryManager``: one per process; records turns, serves views, compacts in the background.

When a summary is written: after ``record()`` stores a turn, the manager checks the
channel's unfolded turns against the ``WindowPolicy``; on overflow it starts (at most) one
background task for that channel. The task folds the oldest turns into the summary via the
``Summarizer`` and commits with ``Store.commit_summary`` *only if the channel's version is
unchanged* — a ``reset``, edit, delete or another compaction in between voids the result.

Why nothing is lost: turns are committed before ``record()`` returns; compaction never
deletes turns (they stay as the archive, marked folded by the fold pointer); a failed,
timed-out or rejected summary leaves the old state and is retried with exponential backoff;
a view that cannot fit every unfolded turn drops the oldest from the *prompt* only.

The reply path (``record`` → ``view``) never awaits a summarizer call.

The archive (three-level memory: turns → episodes → facts): every compaction also commits,
in the same transaction, an ``Episode`` (seq and time range, speakers, the episode summary
from the same summarizer call) and the long-term facts the model extracted, which may
supersede older ones. ``view(..., recall=True)`` retrieves the archive items most relevant
to the triggering message and recent turns, within ``recall_tokens`` (``memory.recall``).
``remember`` / ``facts`` / ``forget`` serve ``/remember``, ``/memory`` and ``/forget``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from memory.models import (
    ChannelFact,
    ChannelKey,
    ChannelStats,
    Episode,
    MemoryView,
    NewChannelFact,
    NewEpisode,
    NewTurn,
    RecordResult,
)
from memory.recall import fit_recall, recall_query
from memory.search_text import query_terms
from memory.store import ChangeOutcome, ResetResult, Store
from memory.summarizer import Summarizer
from memory.text import clean_text
from memory.tokens import Tokenizer
from memory.window import WindowPolicy, build_view

__all__ = ["Digest", "LeaseBusy", "MemoryManager"]

log = logging.getLogger(__name__)

VIEW_TURN_LIMIT = 400
"""Most unfolded turns a view reads; far more than any budget fits, bounded for cost."""


class LeaseBusy(Exception):
    """Another process holds the channel's compaction lease."""


@dataclass(frozen=True, slots=True)
class Digest:
    """What ``/summary`` shows: the up-to-date summary text plus counts.

    ``fresh`` is false when the summary model failed and ``text`` is the stored summary.
    ``episodes`` are the newest archived episodes the summary covers (newest first), so
    ``/summary`` can cite their time ranges.
    """

    text: str
    stats: ChannelStats
    fresh: bool
    empty: bool
    episodes: tuple[Episode, ...] = ()


class MemoryManager:
    """Per-channel memory over a ``Store``; see the module docstring for when and why."""

    def __init__(
        self,
        store: Store,
        summarizer: Summarizer,
        tokenizer: Tokenizer,
        policy: WindowPolicy | None = None,
        *,
        summary_tokens: int = 600,
        facts_tokens: int = 300,
        retry_base: float = 5.0,
        retry_max: float = 600.0,
        retention_days: float | None = None,
        clock: Callable[[], float] = time.time,
        lease_ttl: float | None = None,
        lease_wait: float = 2.0,
        recall_tokens: int = 0,
        recall_facts: int = 8,
        recall_episodes: int = 4,
        max_inflight_records: int = 256,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.tokenizer = tokenizer
        self.policy = policy or WindowPolicy()
        self.summary_tokens = summary_tokens
        self.facts_tokens = facts_tokens
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.retention_days = retention_days
        self.clock = clock
        # Renewed every third of its life while compacting; a dead holder blocks no longer.
        self.lease_ttl = lease_ttl or 30.0
        self.lease_wait = lease_wait
        # Backpressure: a burst of thousands of events waits here, parked, instead of
        # crowding the event loop's ready queue (which is what delays everything else).
        # 256 in flight still fill a group commit.
        self._admit = asyncio.Semaphore(max_inflight_records)
        self.recall_tokens = recall_tokens
        self.recall_facts = recall_facts
        self.recall_episodes = recall_episodes
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._tasks: dict[ChannelKey, asyncio.Task[Any]] = {}
        self._again: set[ChannelKey] = set()
        self._failures: dict[ChannelKey, int] = {}
        self._retention: asyncio.Task[None] | None = None
        self._closed = False
        self.compactions = 0
        self.compaction_failures = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Resume compaction for channels left overflowing; start retention if configured."""
        for key in await self.store.channels():
            await self._maybe_compact(key)
        if self.retention_days:
            self._retention = asyncio.create_task(self._retention_loop(), name="gistbot-retention")

    async def close(self, *, grace: float = 5.0) -> None:
        """Let running compactions finish within ``grace`` seconds, then cancel the rest.

        A cancelled compaction has committed nothing, so the old state stands.
        """
        self._closed = True
        tasks = [t for t in self._tasks.values() if not t.done()]
        if self._retention is not None:
            tasks.append(self._retention)
            self._retention.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    async def wait_idle(self) -> None:
        """Wait until no compaction is running or scheduled (tests, shutdown, CLI)."""
        while True:
            tasks = [t for t in self._tasks.values() if not t.done()]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ reply path

    def prepare(self, turn: NewTurn) -> NewTurn:
        """Clean the text (NUL, lone surrogates) and count its tokens once, for the store."""
        text = clean_text(turn.text)
        name = clean_text(turn.author_name)
        return replace(turn, text=text, author_name=name, tokens=self.tokenizer.count(text))

    async def record(self, turn: NewTurn) -> RecordResult:
        """Store a turn durably (idempotent on message id) and schedule compaction if due."""
        async with self._admit:
            result = await self.store.record(self.prepare(turn))
        if result.created:
            hint = result.pending_hint
            if (
                hint is not None
                and not self.policy.window_tokens
                and not self.policy.should_compact(hint, 0)
            ):
                return result  # certainly under the window: skip the count query
            try:
                await self._maybe_compact(turn.key)
            except Exception:  # the turn is stored; compaction is retried on the next record
                log.warning("could not check %s for compaction", turn.key, exc_info=True)
        return result

    async def view(
        self,
        key: ChannelKey,
        budget: int,
        *,
        through_seq: int | None = None,
        recall: bool = False,
    ) -> MemoryView:
        """The committed memory that fits ``budget`` tokens; never waits for compaction.

        With ``recall`` (and ``recall_tokens`` > 0) the archive items most relevant to the
        newest turn and the few before it are added, within ``min(recall_tokens,
        budget // 4)`` tokens taken from the same budget.
        """
        state, turns = await self.store.snapshot(
            key, limit=VIEW_TURN_LIMIT, through_seq=through_seq
        )
        if not recall or self.recall_tokens <= 0 or not turns:
            return build_view(
                state,
                turns,
                budget=budget,
                tokenizer=self.tokenizer,
                facts_budget=self.facts_tokens,
            )
        found = await self.store.search(
            key,
            recall_query(turns),
            facts_limit=self.recall_facts,
            episodes_limit=self.recall_episodes,
        )
        chosen, cost = fit_recall(found, min(self.recall_tokens, budget // 4), self.tokenizer)
        view = build_view(
            state,
            turns,
            budget=budget - cost,
            tokenizer=self.tokenizer,
            facts_budget=self.facts_tokens,
        )
        return replace(view, recall=chosen, recall_tokens=cost)

    # ------------------------------------------------------------------ commands

    async def digest(self, key: ChannelKey, *, episodes: int = 3) -> Digest:
        """``/summary``: the summary brought up to date with unfolded turns; stores nothing.

        Also returns the newest ``episodes`` archived episodes, for the "Earlier:" line.
        """
        state, turns = await self.store.snapshot(key, limit=VIEW_TURN_LIMIT)
        stats = await self.stats(key)
        if not state.text and not turns and not state.facts:
            return Digest("", stats, fresh=True, empty=True)
        cited = tuple(await self.store.episodes(key, limit=episodes)) if episodes > 0 else ()
        try:
            text = await self.summarizer.digest(state, turns, max_tokens=self.summary_tokens)
            return Digest(text, stats, fresh=True, empty=False, episodes=cited)
        except Exception:
            log.warning("digest for %s failed; showing the stored summary", key, exc_info=True)
            fallback = state.text or "\n".join(f"{t.author_name}: {t.text}" for t in turns[-10:])
            return Digest(fallback, stats, fresh=False, empty=False, episodes=cited)

    async def remember(self, key: ChannelKey, text: str, *, author: str = "") -> ChannelFact:
        """``/remember``: pin ``text`` as a long-term fact of the channel."""
        clean = clean_text(text).strip()
        if not clean:
            raise ValueError("nothing to remember")
        fact = NewChannelFact(clean, (), author=clean_text(author), pinned=True)
        return await self.store.add_fact(key, fact, now=self.clock())

    async def facts(self, key: ChannelKey, *, limit: int = 200) -> list[ChannelFact]:
        """``/memory``: the channel's long-term facts, newest first (superseded included)."""
        return await self.store.list_facts(key, limit=limit)

    async def forget(self, key: ChannelKey, ref: str) -> ChannelFact | list[ChannelFact] | None:
        """``/forget``: delete the fact ``ref`` names — ``12``/``#12`` by id, else the one
        fact whose text matches. Returns the deleted fact, the candidates when the text
        matches several (nothing deleted), or None when nothing matches."""
        ref = ref.strip()
        digits = ref.removeprefix("#")
        if digits.isdigit():
            return await self.store.delete_fact(key, int(digits))
        if not ref:
            return None
        low = ref.casefold()
        facts = await self.store.list_facts(key, limit=1000)
        exact = [f for f in facts if f.text.casefold() == low]
        matches = exact or [f for f in facts if low in f.text.casefold()]
        if not matches:
            found = await self.store.search(key, query_terms(ref), facts_limit=2, episodes_limit=0)
            matches = list(found.facts)
        if len(matches) != 1:
            return matches or None
        return await self.store.delete_fact(key, matches[0].id)

    async def reset(self, key: ChannelKey) -> ResetResult:
        """Forget a channel. A compaction in flight is cancelled, and its commit would fail."""
        task = self._tasks.pop(key, None)
        self._again.discard(key)
        self._failures.pop(key, None)
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        return await self.store.reset(key)

    async def edit(self, key: ChannelKey, message_id: str, text: str) -> ChangeOutcome:
        """Apply a platform edit to an unfolded turn."""
        clean = clean_text(text)
        return await self.store.edit(key, message_id, clean, self.tokenizer.count(clean))

    async def delete(self, key: ChannelKey, message_id: str) -> ChangeOutcome:
        """Apply a platform delete to an unfolded turn."""
        return await self.store.delete(key, message_id)

    async def stats(self, key: ChannelKey) -> ChannelStats:
        """Counts for the ``/summary`` footer, with the summary's token size filled in."""
        stats = await self.store.stats(key)
        state = await self.store.state(key, facts_limit=0)
        return replace(stats, summary_tokens=self.tokenizer.count(state.text))

    def busy(self, key: ChannelKey) -> bool:
        """Whether a compaction is running or scheduled for ``key``."""
        task = self._tasks.get(key)
        return task is not None and not task.done()

    # ------------------------------------------------------------------ compaction

    async def _maybe_compact(self, key: ChannelKey) -> None:
        if self._closed:
            return
        if self.busy(key):
            self._again.add(key)  # the running task looks again before it exits
            return
        count, tokens = await self.store.pending_size(key)
        if self.policy.should_compact(count, tokens) and not self.busy(key):
            self._tasks[key] = asyncio.create_task(self._compact_loop(key), name=f"compact {key}")

    async def compact_now(self, key: ChannelKey, *, force: bool = False) -> bool:
        """Compact ``key`` and wait (used when the model reports context overflow).

        With ``force`` the oldest half of the unfolded turns is folded even under the
        trigger. Returns whether a summary was committed.
        """
        while (running := self._tasks.get(key)) is not None and not running.done():
            await asyncio.gather(running, return_exceptions=True)
        # Registered like a background compaction, so records meanwhile do not start a
        # second summarizer call for this channel (single flight); they ask to look again.
        task = asyncio.create_task(self._compact_once(key, force=force), name=f"compact {key}")
        self._tasks[key] = task
        await asyncio.wait({task})
        if key in self._again:
            self._again.discard(key)
            await self._maybe_compact(key)
        if task.cancelled():  # reset() or close() cancelled it; nothing was committed
            return False
        if isinstance(task.exception(), LeaseBusy):
            return False
        return task.result()

    async def _compact_loop(self, key: ChannelKey) -> None:
        while not self._closed:
            self._again.discard(key)
            try:
                await self._compact_once(key)
                self._failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except LeaseBusy:
                # Another process holds the lease: look again later, not a failure. When it
                # is done the channel is usually under the window and nothing is left to do.
                await asyncio.sleep(self.lease_wait)
                continue
            except Exception as e:
                self.compaction_failures += 1
                n = self._failures.get(key, 0) + 1
                self._failures[key] = n
                delay = min(self.retry_base * 2 ** (n - 1), self.retry_max)
                log.warning(
                    "compaction of %s failed (%s: %s); attempt %d, retrying in %.0fs",
                    key,
                    type(e).__name__,
                    e,
                    n,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            count, tokens = await self.store.pending_size(key)
            if self.policy.should_compact(count, tokens) or key in self._again:
                continue  # still over, or a record arrived while we looked: look again
            return

    async def _compact_once(self, key: ChannelKey, *, force: bool = False) -> bool:
        """One compaction under the channel's lease (single flight across processes).

        The lease is short and renewed while the summarizer works, so a process that dies
        mid-compaction blocks the channel for at most ``lease_ttl`` seconds. Correctness does
        not rest on the lease: the commit is conditional on the version anyway.
        """
        if not await self.store.try_lease(key, self.owner, self.lease_ttl):
            raise LeaseBusy(f"another process is compacting {key}")
        renew = asyncio.create_task(self._renew_lease(key))
        try:
            return await self._fold(key, force=force)
        finally:
            renew.cancel()
            try:
                await asyncio.shield(self.store.release_lease(key, self.owner))
            except Exception:  # it expires by itself; nothing else depends on it
                log.debug("could not release the lease of %s", key, exc_info=True)

    async def _renew_lease(self, key: ChannelKey) -> None:
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                if not await self.store.try_lease(key, self.owner, self.lease_ttl):
                    log.warning(
                        "lost the compaction lease of %s; the commit check still guards the result",
                        key,
                    )
                    return
            except Exception:
                log.debug("could not renew the lease of %s", key, exc_info=True)

    async def _fold(self, key: ChannelKey, *, force: bool) -> bool:
        state = await self.store.state(key)
        pending = await self.store.pending(key, limit=VIEW_TURN_LIMIT * 4)
        n = self.policy.fold_count(pending)
        if force and n == 0 and len(pending) > 1:
            n = len(pending) // 2
        if n == 0:
            return False
        fold = pending[:n]
        episode: NewEpisode | None = None
        new_facts: tuple[NewChannelFact, ...] = ()
        if any(t.text.strip() for t in fold):
            # Current facts that look related, so the model can mark one as replaced.
            known = await self.store.search(
                key,
                query_terms(*(t.text for t in fold)),
                facts_limit=10,
                episodes_limit=0,
                include_superseded=False,
            )
            result = await self.summarizer.summarize(state, fold, known_facts=known.facts)
            text, facts = result.text, result.facts
            speakers = dict.fromkeys(t.author_name or t.author_id for t in fold)
            episode = NewEpisode(
                fold[0].seq,
                fold[-1].seq,
                min(t.sent_at for t in fold),
                max(t.sent_at for t in fold),
                tuple(s for s in speakers if s),
                result.episode,
            )
            new_facts = result.new_facts
        else:
            # Only blank turns (attachment-only messages): nothing to summarize, and a model
            # asked to summarize nothing answers nothing, which is rejected, so the channel
            # would retry forever. Fold them under the unchanged summary instead.
            text, facts = state.text, ()
        committed = await self.store.commit_summary(
            key,
            expected_version=state.version,
            text=text,
            folded_through=fold[-1].seq,
            facts=facts,
            now=self.clock(),
            episode=episode,
            channel_facts=new_facts,
        )
        if committed:
            self.compactions += 1
            log.info(
                "compacted %s: folded %d turns through seq %d (%d facts carried)",
                key,
                n,
                fold[-1].seq,
                len(facts),
            )
        else:
            log.info("compaction of %s discarded: the channel changed meanwhile", key)
        return committed

    async def _retention_loop(self) -> None:
        assert self.retention_days
        while True:
            cutoff = self.clock() - self.retention_days * 86400
            try:
                n = await self.store.purge_folded_before(cutoff)
                if n:
                    log.info(
                        "retention: deleted %d folded turns older than %.0f days",
                        n,
                        self.retention_days,
                    )
            except Exception:
                log.warning("retention pass failed; will try again", exc_info=True)
            await asyncio.sleep(3600)
