"""Backfill after downtime, platform-neutral: what was said while gistbot was away.

Discord's gateway does not replay missed messages and Slack stops re-delivering after its
retries, so on start and after each reconnect every remembered channel is read back from
its newest stored message on (``discord/backfill.py``, ``slack/backfill.py`` fetch) and the
missed messages are remembered, never answered.

- **Where it starts**: the newest stored user turn, unless an earlier backfill is still
  marked unfinished (``begin_backfill``/``end_backfill``): a run killed midway resumes from
  its mark instead of jumping over the hole. A channel with no stored turn is skipped.
- **Bounded**: at most ``BACKFILL_MAX_MESSAGES`` per channel, the newest kept; the skipped
  count is logged.
- **Idempotent and ordered**: recorded by platform id (seen live and backfilled is one
  turn), oldest first, each with its own ``sent_at``.
- **Nothing half-fetched**: a failed fetch records nothing for that channel; the next
  start or reconnect tries again.
- **In the background**: ``trigger`` returns at once; runs are single-flight, triggers
  during a run coalesce into one more run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bot.platform import ChannelKey, ChatService, IncomingMessage, StoreError

__all__ = [
    "CURSOR_CANDIDATES",
    "SKIP_COUNT_LIMIT",
    "Backfiller",
    "ChannelReport",
    "Fetched",
    "HistoryStore",
]

log = logging.getLogger(__name__)

CURSOR_CANDIDATES = 20  # stored user turns looked at for the newest platform id
SKIP_COUNT_LIMIT = 1000  # older missed messages counted (not fetched for memory) at most


@runtime_checkable
class HistoryStore(Protocol):
    """What backfill reads from the database; both stores implement it structurally."""

    async def channels(self) -> list[ChannelKey]:
        """Every channel with stored state."""

    async def newest_message_ids(self, key: ChannelKey, *, limit: int = 20) -> list[str]:
        """Message ids of the newest ``limit`` user turns, newest seq first."""

    async def begin_backfill(self, key: ChannelKey, after_id: str) -> str:
        """Durably mark a backfill of ``key`` starting after ``after_id``, unless one is
        marked already (an interrupted one: it is returned, and resumed from)."""

    async def end_backfill(self, key: ChannelKey, after_id: str) -> None:
        """Clear the mark if it is still ``after_id``: everything read was stored."""

    async def backfill_mark(self, key: ChannelKey) -> str | None:
        """The mark in effect, if any."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """One channel's missed messages, oldest first (at most the bound), and how many
    older ones were missed but not kept (``skipped_at_least``: the count stopped early)."""

    messages: Sequence[IncomingMessage]
    skipped: int = 0
    skipped_at_least: bool = False


@dataclass(frozen=True, slots=True)
class ChannelReport:
    """What one channel's backfill did (kept for tests and ``last``)."""

    key: ChannelKey
    after: str
    fetched: int
    new: int
    skipped: int


# (channel, cursor id, bound) -> the missed messages, or None: not reachable from here.
Fetch = Callable[[ChannelKey, str, int], Awaitable[Fetched | None]]
Order = Callable[[str], tuple[int, ...] | None]  # platform id -> sort key (None: not one)


def _any_of(
    filters: Sequence[Callable[[ChannelKey], bool] | None],
) -> Callable[[ChannelKey], bool] | None:
    """One filter for coalesced triggers: None (every channel) if any of them is None."""
    if any(f is None for f in filters):
        return None
    return lambda key: any(f(key) for f in filters if f is not None)


class Backfiller:
    """Runs one platform's backfill in the background, single flight, coalescing triggers."""

    def __init__(
        self,
        platform: str,
        service: ChatService,
        store: HistoryStore,
        fetch: Fetch,
        order: Order,
        *,
        bound: int,
    ) -> None:
        self.platform, self.service, self.store = platform, service, store
        self.fetch, self.order, self.bound = fetch, order, bound
        self.runs = 0  # completed runs
        self.last: dict[ChannelKey, ChannelReport] = {}
        self._task: asyncio.Task[None] | None = None
        self._again: list[Callable[[ChannelKey], bool] | None] = []
        self._idle = asyncio.Event()
        self._idle.set()
        self._ran = asyncio.Condition()

    @property
    def enabled(self) -> bool:
        """``BACKFILL_MAX_MESSAGES=0`` turns backfill off."""
        return self.bound > 0

    def trigger(self, reason: str, only: Callable[[ChannelKey], bool] | None = None) -> None:
        """Backfill (the channels ``only`` accepts) in the background; returns at once."""
        if not self.enabled:
            return
        self._again.append(only)
        if self._task is None or self._task.done():
            self._idle.clear()
            self._task = asyncio.get_running_loop().create_task(self._loop(reason))

    async def wait_idle(self) -> None:
        """Until no run is in progress or pending (tests, shutdown)."""
        await self._idle.wait()

    async def wait_runs(self, runs: int) -> None:
        """Until ``runs`` runs have completed since the start, and none is pending."""
        async with self._ran:
            await self._ran.wait_for(lambda: self.runs >= runs)
        await self.wait_idle()

    async def close(self) -> None:
        """Stop a run in progress (what it recorded stays; the rest is fetched next time)."""
        self._again.clear()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._idle.set()

    async def _loop(self, reason: str) -> None:
        try:
            while self._again:
                filters, self._again = self._again, []
                await self.run(reason, _any_of(filters))
                reason = "again"
        except Exception:
            log.exception("%s backfill failed; the next start or reconnect tries again",
                          self.platform)
        finally:
            self._idle.set()

    async def run(self, reason: str,
                  only: Callable[[ChannelKey], bool] | None = None) -> list[ChannelReport]:
        """Backfill every remembered channel of the platform once, one after another."""
        reports = []
        for key in await self.store.channels():
            if key.platform != self.platform or (only is not None and not only(key)):
                continue
            report = await self.channel(key)
            if report is not None:
                reports.append(report)
                self.last[key] = report
        self.runs += 1
        async with self._ran:
            self._ran.notify_all()
        new = sum(r.new for r in reports)
        skipped = sum(r.skipped for r in reports)
        log.info("%s backfill (%s) done: %d channels read, %d missed messages remembered, "
                 "%d older ones skipped", self.platform, reason, len(reports), new, skipped)
        return reports

    async def cursor(self, key: ChannelKey) -> str | None:
        """The newest stored platform message id of ``key`` (None: nothing to go on)."""
        ids = await self.store.newest_message_ids(key, limit=CURSOR_CANDIDATES)
        ranked = [(k, i) for i in ids if (k := self.order(i)) is not None]
        return max(ranked)[1] if ranked else None

    async def channel(self, key: ChannelKey) -> ChannelReport | None:
        """Fetch and remember ``key``'s missed messages; None when it was not read."""
        try:
            return await self._channel(key)
        except StoreError as e:
            log.error("backfill of %s stopped on the store: %s; the next start or reconnect "
                      "tries again", key, e)
            return None

    async def _channel(self, key: ChannelKey) -> ChannelReport | None:
        newest = await self.cursor(key)
        if newest is None:
            return None
        # Marked before reading: if this process dies before all of it is stored, while
        # newer live messages are, the next backfill still starts here.
        after = await self.store.begin_backfill(key, newest)
        try:
            fetched = await self.fetch(key, after, self.bound)
        except Exception:
            log.warning("backfill of %s failed; nothing recorded for it, the next start or "
                        "reconnect tries again", key, exc_info=True)
            return None
        if fetched is None:  # not this process's channel, or gone: nothing to resume
            await self.store.end_backfill(key, after)
            return None
        new = 0
        for msg in fetched.messages:
            new += await self.service.backfilled(msg)  # StoreError: the mark stays
        await self.store.end_backfill(key, after)
        report = ChannelReport(key, after, len(fetched.messages), new, fetched.skipped)
        if fetched.skipped:
            log.warning("backfill of %s: %d missed messages remembered (the newest %d); %s%d "
                        "older ones skipped (BACKFILL_MAX_MESSAGES=%d)", key, new, self.bound,
                        "at least " if fetched.skipped_at_least else "", fetched.skipped,
                        self.bound)
        elif new:
            log.info("backfill of %s: %d missed messages remembered", key, new)
        else:
            log.debug("backfill of %s: nothing missed after %s", key, after)
        return report
