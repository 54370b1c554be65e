"""When a summary is written, and why nothing is lost.

When: after a turn is stored, the channel's unfolded turns (counted in the insert's own
transaction: ``RecordResult.pending``) are checked against the ``WindowPolicy``; on
overflow one background task per channel (single flight, and across processes one lease
holder) folds the oldest turns into the summary via the ``Summarizer``. ``compact_now``
does the same on demand. The reply path never waits for it.

Why nothing is lost: compaction never deletes turns (folded ones stay as the archive); the
commit is atomic and conditional on the channel's version, so a ``/reset``, edit, delete
or another compaction in between voids the result; a failed, timed-out or rejected
summary leaves the old state and is retried with exponential backoff; a summary whose
model call was refused (``CallRefused``: the server is over its daily token limit) is
not a failure and is tried again every ``retry_max`` seconds. Text that arrives for a
turn after it was folded (its files read late: ``MemoryStore.amend``) is stored with the
turn at once and queued; the next fold tells the summarizer that turn again
(``late_turns``) and takes it off the queue in its commit. The lease only
saves duplicate work: correctness rests on the conditional commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from memory.completion import PREEMPTIBLE
from memory.config import VIEW_TURN_LIMIT, MemoryConfig
from memory.errors import CallRefused, Preempted, SummaryRejected
from memory.identifiers import context_for
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    LongTermFact,
    NewEpisode,
    NewLongTermFact,
    RecordResult,
    SummaryState,
    Turn,
)
from memory.store import LeaseStore, MemoryStore
from memory.summarizer import Summarizer, SummaryResult
from memory.window import FOLD_TURN_OVERHEAD, WindowPolicy

__all__ = [
    "AGE_AFTER", "LATE_MARK", "REPLIES_FIRST", "CompactionStore", "Compactor", "LeaseBusy",
    "RelatedFacts", "Views", "fold_cost", "late_turns",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Folded:
    """What one fold commits: the summary and carried facts, and for the archive the folded
    range's episode and the new long-term facts (none when only blank turns were folded)."""

    text: str
    facts: tuple[CarriedIdentifier, ...]
    episode: NewEpisode | None = None
    new_facts: tuple[NewLongTermFact, ...] = ()


class LeaseBusy(Exception):
    """Another process holds the channel's compaction lease."""


class CompactionStore(MemoryStore, LeaseStore, Protocol):
    """What compaction needs of a backend: pending turns, the summary state and its
    conditional commit (``MemoryStore``), and the cross-process lease (``LeaseStore``)."""


class RelatedFacts(Protocol):
    """Where a fold finds the long-term facts its turns may replace (``memory.archive``)."""

    async def related_facts(self, key: ChannelKey, turns: Sequence[Turn]) -> Sequence[LongTermFact]:
        """Current facts of ``key`` that look related to ``turns``."""

    async def stated(
        self, key: ChannelKey, values: Sequence[str], *, before_seq: int
    ) -> dict[str, Turn]:
        """The first stored people's turn before ``before_seq`` stating each of ``values``."""


REPLIES_FIRST = 0.25
"""Seconds at most a background compaction waits, before each attempt, for the replies'
views in progress to finish (``Views``)."""


AGE_AFTER = 1
"""Preemptions in a row after which a channel's summary is no longer preemptible: it
waits in line with the replies and runs to its end, so a one-slot endpoint under steady
chat still commits (``bot.llm.gate``, aging)."""


class Views:
    """The replies' views in progress, which a background compaction lets finish first.

    A message that overflows the window is often the one a reply is about to answer: its
    compaction started at once and read, ranked and built its summarizer request on the
    same event loop and reader threads as that reply's view, slowing it
    (docs/decisions/0005). A summary can start later; a reply cannot wait. The wait is
    capped (``REPLIES_FIRST``), so a channel busy with replies is still compacted.
    """

    def __init__(self) -> None:
        self.running = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.contextmanager
    def viewing(self) -> Iterator[None]:
        """Around a reply's view."""
        self.running += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.running -= 1
            if not self.running:
                self._idle.set()

    async def finished(self, cap: float = REPLIES_FIRST) -> None:
        """Return once no view is in progress, or after ``cap`` seconds. The reply that
        follows the record which scheduled the compaction starts its view without
        suspending in between, so one turn of the loop lets it register first (with daily
        quotas set, it reads them first, and the compaction may start before it)."""
        await asyncio.sleep(0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), cap)


class Compactor:
    """Folds overflowing channels into their summaries in the background, one task each.

    ``compactions`` and ``compaction_failures`` count commits and failed attempts of this
    process (a discarded result is neither). ``on_outcome``, when set, hears each attempt's
    outcome: ``committed``, ``discarded`` (the version moved), ``rejected`` (the summary
    failed its checks), ``failed`` or ``preempted`` (a reply took the endpoint's slot) —
    the application counts them (``memory`` knows no metrics library).
    """

    def __init__(
        self,
        store: CompactionStore,
        summarizer: Summarizer,
        policy: WindowPolicy,
        facts: RelatedFacts,
        config: MemoryConfig,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.views = Views()
        """The replies' views in progress (``MemoryManager.view`` registers them)."""
        self.summarizer = summarizer
        self.policy = policy
        self.facts = facts
        self.config = config
        self.clock = clock
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._tasks: dict[ChannelKey, asyncio.Task[Any]] = {}
        self._again: set[ChannelKey] = set()
        self._failures: dict[ChannelKey, int] = {}
        self._preempted: dict[ChannelKey, int] = {}  # preemptions since the last success
        self._refused: set[ChannelKey] = set()  # waiting for a daily token limit (logged)
        self._closed = False
        self.compactions = 0
        self.compaction_failures = 0
        self.on_outcome: Callable[[str], None] | None = None

    def _tell(self, outcome: str) -> None:
        if self.on_outcome is not None:
            try:
                self.on_outcome(outcome)
            except Exception:  # an observer must never break compaction
                log.debug("compaction observer failed", exc_info=True)

    # ------------------------------------------------------------------ scheduling

    async def resume(self) -> None:
        """Start compaction for every channel a previous run left overflowing."""
        for key in await self.store.channels():
            await self._maybe_compact(key)

    async def recorded(self, key: ChannelKey, result: RecordResult) -> None:
        """Schedule compaction of ``key`` if the turn just stored made it overflow.

        Never raises: the turn is stored, and the next record checks again.
        """
        if not result.created:
            return
        size, hint = result.pending, result.pending_hint
        if size is not None and not self.policy.should_compact(*size):
            return  # under the window, as read in the insert's transaction
        if hint is not None and not self.policy.window_tokens and not self.policy.should_compact(
            hint, 0
        ):
            return  # certainly under the window: skip the count query
        try:
            await self._maybe_compact(key, size)
        except Exception:
            log.warning("could not check %s for compaction", key, exc_info=True)

    def busy(self, key: ChannelKey) -> bool:
        """Whether a compaction is running or scheduled for ``key``."""
        task = self._tasks.get(key)
        return task is not None and not task.done()

    async def _maybe_compact(self, key: ChannelKey, size: tuple[int, int] | None = None) -> None:
        """Start compacting ``key`` if it overflows: its unfolded (count, tokens) are
        ``size`` when known (read with the record), else read now."""
        if self._closed:
            return
        if self.busy(key):
            self._again.add(key)  # the running task looks again before it exits
            return
        count, tokens = size if size is not None else await self.store.pending_size(key)
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
        if task.cancelled():  # cancel() or close() stopped it; nothing was committed
            return False
        if isinstance(task.exception(), LeaseBusy):
            return False
        result: bool = task.result()
        return result

    async def cancel(self, key: ChannelKey) -> None:
        """Stop compacting ``key`` and forget its backoff (before a ``/reset``).

        A cancelled fold has committed nothing; one already committing fails its version check.
        """
        task = self._tasks.pop(key, None)
        self._again.discard(key)
        self._failures.pop(key, None)
        self._preempted.pop(key, None)
        self._refused.discard(key)
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def wait_idle(self) -> None:
        """Wait until no compaction is running or scheduled (tests, shutdown, CLI)."""
        while True:
            tasks = [t for t in self._tasks.values() if not t.done()]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self, *, grace: float) -> None:
        """Start no more compactions; let running ones finish within ``grace`` seconds,
        then cancel the rest (a cancelled compaction has committed nothing)."""
        self._closed = True
        tasks = [t for t in self._tasks.values() if not t.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    # ------------------------------------------------------------------ one channel's task

    async def _compact_loop(self, key: ChannelKey) -> None:
        """Fold until the channel is under the window; back off after each failure."""
        while not self._closed:
            self._again.discard(key)
            await self.views.finished()  # replies first (``Views``)
            try:
                await self._compact_once(key)
                self._failures.pop(key, None)
                self._preempted.pop(key, None)
                self._refused.discard(key)
            except asyncio.CancelledError:
                raise
            except Preempted as e:
                # A reply needed the endpoint's slot: not the model's fault. Try again soon,
                # without counting a failure or growing the backoff; after AGE_AFTER
                # preemptions the attempt is no longer preemptible (``_compact_once``).
                n = self._preempted[key] = self._preempted.get(key, 0) + 1
                self._tell("preempted")
                log.info("summary of %s preempted by a reply %s (%d in a row); next attempt "
                         "%s", key, e.progress(), n,
                         "runs to its end" if n >= AGE_AFTER else "may be preempted")
                await asyncio.sleep(self.config.lease_wait)
                continue
            except CallRefused as e:
                # Whoever pays is over a daily token limit: nothing was sent. Not a failure;
                # one line when it starts, then a look every ``retry_max`` seconds.
                if key not in self._refused:
                    self._refused.add(key)
                    log.info("compaction of %s waits: %s; trying again every %.0fs",
                             key, e, self.config.retry_max)
                await asyncio.sleep(self.config.retry_max)
                continue
            except LeaseBusy:
                # Another process holds the lease: look again later, not a failure. When it
                # is done the channel is usually under the window and nothing is left to do.
                await asyncio.sleep(self.config.lease_wait)
                continue
            except Exception as e:
                await asyncio.sleep(self._failed(key, e))
                continue
            count, tokens = await self.store.pending_size(key)
            if self.policy.should_compact(count, tokens) or key in self._again:
                continue  # still over, or a record arrived while we looked: look again
            return

    def _failed(self, key: ChannelKey, error: Exception) -> float:
        """Count a failed attempt; the delay before the next one (exponential, capped)."""
        self.compaction_failures += 1
        n = self._failures.get(key, 0) + 1
        self._failures[key] = n
        delay: float = min(self.config.retry_base * 2 ** (n - 1), self.config.retry_max)
        log.warning(
            "compaction of %s failed (%s: %s); attempt %d, retrying in %.0fs",
            key,
            type(error).__name__,
            error,
            n,
            delay,
        )
        return delay

    async def _compact_once(self, key: ChannelKey, *, force: bool = False) -> bool:
        """One compaction under the channel's lease (single flight across processes).

        The lease is short and renewed while the summarizer works, so a process that dies
        mid-compaction blocks the channel for at most ``lease_ttl`` seconds. Correctness does
        not rest on the lease: the commit is conditional on the version anyway.
        """
        if not await self.store.try_lease(key, self.owner, self.config.lease_ttl):
            raise LeaseBusy(f"another process is compacting {key}")
        renew = asyncio.create_task(self._renew_lease(key))
        aged = PREEMPTIBLE.set(self._preempted.get(key, 0) < AGE_AFTER)
        try:
            return await self._fold(key, force=force)
        except (Preempted, CallRefused):
            raise  # gave the endpoint to a reply, or over a token limit: not a failure
        except Exception as e:
            self._tell("rejected" if isinstance(e, SummaryRejected) else "failed")
            raise
        finally:
            PREEMPTIBLE.reset(aged)
            renew.cancel()
            try:
                await asyncio.shield(self.store.release_lease(key, self.owner))
            except Exception:  # it expires by itself; nothing else depends on it
                log.debug("could not release the lease of %s", key, exc_info=True)

    async def _renew_lease(self, key: ChannelKey) -> None:
        ttl = self.config.lease_ttl
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                if not await self.store.try_lease(key, self.owner, ttl):
                    log.warning(
                        "lost the compaction lease of %s; the commit check still guards the result",
                        key,
                    )
                    return
            except Exception:
                log.debug("could not renew the lease of %s", key, exc_info=True)

    async def _fold(self, key: ChannelKey, *, force: bool) -> bool:
        """Fold the oldest pending turns and commit if the channel's version is unchanged.

        The same commit archives the folded range as an episode and stores the long-term
        facts the summarizer extracted.
        """
        state = await self.store.state(key)
        chosen = await self._turns_to_fold(key, force=force)
        if chosen is None:
            return False
        late, fold = chosen
        told = [*late, *fold]
        if any(t.text.strip() for t in told):
            folded = await self._summarized(key, state, told, fold)
        else:
            # Only blank turns (attachment-only messages): nothing to summarize, and a model
            # asked to summarize nothing answers nothing, which is rejected, so the channel
            # would retry forever. Fold them under the unchanged summary instead.
            folded = _Folded(state.text, ())
        committed = await self.store.commit_summary(
            key,
            expected_version=state.version,
            text=folded.text,
            folded_through=fold[-1].seq,
            facts=folded.facts,
            now=self.clock(),
            episode=folded.episode,
            channel_facts=folded.new_facts,
            amended=[t.seq for t in late],
        )
        self._record_outcome(key, committed, fold, folded.facts, late)
        return committed

    async def _turns_to_fold(
        self, key: ChannelKey, *, force: bool
    ) -> tuple[list[Turn], list[Turn]] | None:
        """The turns completed since they were folded and the oldest pending turns to fold
        now, together within one call's input; None when the window needs no fold."""
        pending = await self.store.pending(key, limit=VIEW_TURN_LIMIT * 4)
        n = self.policy.fold_count(pending)
        if force and n == 0 and len(pending) > 1:
            n = len(pending) // 2
        if n == 0:
            return None
        # Turns folded before their files were read come along again (``late_turns``),
        # within the bound of one call's input.
        late = late_turns(await self.store.amended(key), self.policy.max_fold_tokens // 2)
        fold = _first_that_fit(pending[:n], self.policy.max_fold_tokens - fold_cost(late))
        return late, fold

    async def _summarized(
        self, key: ChannelKey, state: SummaryState, told: Sequence[Turn], fold: Sequence[Turn]
    ) -> _Folded:
        """The summary of ``state`` with ``told`` folded in, and ``fold``'s episode."""
        # Current facts that look related, so the model can mark one as replaced.
        known = await self.facts.related_facts(key, told)
        result = await self.summarizer.summarize(state, told, known_facts=known, key=key)
        facts = await self._stated_where(key, state, result)
        speakers = dict.fromkeys(t.author_name or t.author_id for t in fold)
        episode = NewEpisode(
            fold[0].seq,
            fold[-1].seq,
            min(t.sent_at for t in fold),
            max(t.sent_at for t in fold),
            tuple(s for s in speakers if s),
            result.episode,
        )
        return _Folded(result.text, facts, episode, result.new_facts)

    def _record_outcome(
        self,
        key: ChannelKey,
        committed: bool,
        fold: Sequence[Turn],
        facts: Sequence[CarriedIdentifier],
        late: Sequence[Turn],
    ) -> None:
        """Count and log a fold's commit, or its discard when the channel changed meanwhile."""
        self._tell("committed" if committed else "discarded")
        if not committed:
            log.info("compaction of %s discarded: the channel changed meanwhile", key)
            return
        self.compactions += 1
        log.info(
            "compacted %s: folded %s through seq %d (%s carried%s)",
            key,
            _count(len(fold), "turn"),
            fold[-1].seq,
            _count(len(facts), "fact"),
            f", {_count(len(late), 'earlier turn')} completed later" if late else "",
        )

    async def _stated_where(
        self, key: ChannelKey, state: SummaryState, result: SummaryResult
    ) -> tuple[CarriedIdentifier, ...]:
        """``result.facts`` with those new to the ledger that only the previous summary held
        (``result.unstated``) given the turn that stated them: its seq and speaker, its
        sentence. Otherwise such a fact is dated by this compaction and described by a
        summary line, and the identifiers one message (or a speaker's run of messages)
        stated, dropped by different compactions, no longer look stated together
        (``memory.relevance.rank_facts``). Best effort: a failed search leaves them so."""
        facts = result.facts
        old = {f.value for f in state.facts}
        lost = [v for v in result.unstated if v not in old]
        if not lost:
            return facts
        try:
            turns = await self.facts.stated(key, lost, before_seq=state.folded_through + 1)
        except Exception:
            log.debug("could not find where %s stated its identifiers", key, exc_info=True)
            return facts
        out = []
        for fact in facts:
            turn = turns.get(fact.value)
            if turn is not None:
                fact = replace(fact, first_seq=min(fact.first_seq, turn.seq),
                               context=f"{turn.author_name or turn.author_id}: "
                                       f"{context_for(fact.value, turn.text)}")
            out.append(fact)
        return tuple(out)


LATE_MARK = "(an earlier message, completed after it was summarized) "
"""Put before a late turn's text in a summary request, so the model adds what it brings
instead of taking it for a message sent again."""


def fold_cost(turns: Sequence[Turn]) -> int:
    """Tokens ``turns`` take in a summary request (``max_fold_tokens`` counts them)."""
    return sum(t.tokens + FOLD_TURN_OVERHEAD for t in turns)


def _first_that_fit(turns: Sequence[Turn], max_tokens: int) -> list[Turn]:
    """The oldest of ``turns`` whose cost fits ``max_tokens``; always the first one."""
    total = 0
    for i, turn in enumerate(turns):
        total += turn.tokens + FOLD_TURN_OVERHEAD
        if total > max_tokens and i > 0:
            return list(turns[:i])
    return list(turns)


def late_turns(amended: Sequence[Turn], max_tokens: int) -> list[Turn]:
    """Folded turns whose text was completed after their fold (their files read late,
    ``MemoryStore.amend``), oldest first, within ``max_tokens`` (always one, if any), each
    marked (``LATE_MARK``) for the summary request that folds them in again."""
    return [replace(t, text=LATE_MARK + t.text) for t in _first_that_fit(amended, max_tokens)
            ] if amended else []


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one ("1 fact", "2 facts"), for log lines."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
