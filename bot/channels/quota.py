"""Daily token quotas: ``DAILY_TOKENS_PER_USER`` and ``DAILY_TOKENS_PER_SERVER`` (0 = no
limit; a server may set lower ones with ``/config``), counted per UTC day in the database.

Every model call is metered at the LLM gateway (``bot.channels.usage_tab``) on a ``Bill``
naming who pays and the kind of call (``KINDS``): a reply, ``/summary`` and ``/catchup``
the person and their server; a digest and a background summary the server; in a direct
message only the person; on a trusted platform (the operator's own terminal) nobody. The
offline model costs nothing.

A call on a limited account is admitted by a *reservation* of its largest cost
(``bot.llm.cost``), made atomically in the database for the person and the server together
(``UsageStore.reserve_tokens``), and settled to what the provider reported when it ends:
the day's count never passes a limit, across callers and replicas. A call is refused
(``OverQuota``) when its largest cost does not fit in what the settled count leaves; when
running calls' reservations are in the way, it waits up to ``WAIT_AT_MOST`` seconds for
them. An unsettled reservation (its process was killed) expires after ``RESERVATION_TTL``
seconds. Unlimited accounts reserve nothing: their counts are written every
``FLUSH_EVERY`` seconds and at close. A person past their quota is told once a day,
privately (claimed in the database, so once across replicas); their messages are still
remembered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from bot.channels.config import ChannelSettings
from bot.channels.usage_tab import Cost, UsageTab, open_tab, paying
from bot.errors import OVER_QUOTA, OverQuota
from bot.installed import is_trusted
from bot.messages import Reply
from bot.stores.settings import SERVER
from bot.stores.usage import Refusal, UsageKey, UsageStore
from memory.errors import StoreError
from memory.models import ChannelKey

__all__ = [
    "FLUSH_EVERY", "KINDS", "OVER_QUOTA", "PERSONAL_KINDS", "RESERVATION_TTL", "WAIT_AT_MOST",
    "Bill", "Quota", "Reservation", "utc_day",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

FLUSH_EVERY = 1.0  # seconds between writes of counts no limit is waiting for
RESERVATION_TTL = 900.0
"""Seconds a reservation holds budget if it is never settled (its process died): longer
than any call runs (``LLM_TIMEOUT`` times its retries, a whole reply stream)."""
WAIT_AT_MOST = 120.0
"""Seconds a call waits for other calls' reservations to settle before it is refused."""
RETRY_EVERY = (0.05, 0.1, 0.2, 0.4, 0.8)
"""Seconds between tries while waiting (sooner when a call of this process settles)."""
KINDS = {
    "reply": "replies",
    "summary": "/summary",
    "catchup": "/catchup",
    "digest": "digests",
    "compaction": "background summaries",
    "embedding": "embeddings",
}
"""The kinds of model call counted apart, and how ``/config usage`` names them."""
PERSONAL_KINDS = ("reply", "summary", "catchup")
"""The kinds also charged to the person who asked (the others are the server's)."""

SettingsOf = Callable[[ChannelKey], Awaitable[ChannelSettings]]


def utc_day(ts: float) -> str:
    """The UTC date of unix time ``ts``, ``YYYY-MM-DD`` (quotas reset at 00:00 UTC)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


class Quota:
    """Counts tokens per person and server per UTC day, per kind; opens the bills that
    the LLM gateway admits and charges calls with. ``settings_of`` gives a channel's
    limits (``ChannelConfig.get``); ``direct`` whether a key is a direct conversation, for
    a bill without a message that says so (the platforms answer: ``bot.installed.is_direct``)."""

    def __init__(self, store: UsageStore | None, *, settings_of: SettingsOf | None = None,
                 direct: Callable[[ChannelKey], bool] = lambda key: False,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.settings_of, self.clock = store, settings_of, clock
        self.is_direct = direct
        self._settled = asyncio.Event()  # set (and replaced) whenever a call settles
        self._cleanups: set[asyncio.Future[None]] = set()
        # unwritten counts of accounts without a limit: (day, account, kind) -> tokens
        self._pending: dict[tuple[str, UsageKey, str], int] = {}
        self._flusher: asyncio.Task[None] | None = None

    def day(self) -> str:
        """Today, UTC."""
        return utc_day(self.clock())

    @staticmethod
    def accounts(key: ChannelKey, user_id: str, *, direct: bool) -> list[UsageKey]:
        """The person's account (if any), and their server's unless this is a direct message."""
        person = [UsageKey(key.platform, key.workspace, user_id)] if user_id else []
        return person if direct else [*person, UsageKey(key.platform, key.workspace)]

    @staticmethod
    def limits(settings: ChannelSettings, accounts: list[UsageKey]) -> dict[UsageKey, int]:
        """The limited accounts among ``accounts`` and their limits."""
        out = {}
        for account in accounts:
            limit = (settings.daily_tokens_per_server if account.user == SERVER
                     else settings.daily_tokens_per_user)
            if limit > 0:
                out[account] = limit
        return out

    def bill(self, key: ChannelKey, kind: str, user_id: str = "", *, direct: bool | None = None,
             settings: ChannelSettings | None = None) -> Bill | None:
        """Who pays for ``kind`` calls in ``key`` (see the module docstring); None when
        nobody does (a trusted platform, no store, a background call in a direct message)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {tuple(KINDS)}, not {kind!r}")
        if self.store is None or is_trusted(key.platform):
            return None
        user = user_id if kind in PERSONAL_KINDS else ""
        direct = self.is_direct(key) if direct is None else direct
        accounts = self.accounts(key, user, direct=direct)
        return Bill(self, key, accounts, kind, settings) if accounts else None

    @contextlib.contextmanager
    def paying(self, key: ChannelKey, kind: str, user_id: str = "", *,
               direct: bool | None = None, settings: ChannelSettings | None = None
               ) -> Iterator[None]:
        """Model calls made inside the block are metered on :meth:`bill`'s bill."""
        with paying(self.bill(key, kind, user_id, direct=direct, settings=settings)):
            yield

    # ------------------------------------------------------------------ the bill's steps

    async def reserve(self, limited: dict[UsageKey, int], cost: int, user_id: str
                      ) -> Reservation | None:
        """Hold ``cost`` tokens on every limited account, waiting while other calls'
        reservations are in the way; raise ``OverQuota`` when the call cannot fit today.
        None: the database could not be reached, and the call goes ahead unreserved."""
        if self.store is None:
            return None
        held = Reservation(uuid.uuid4().hex, self.day(), cost)
        waited, tries = time.monotonic(), 0
        while True:
            now = self.clock()
            try:
                refusal = await self._reserve_once(held, limited, now)
            except StoreError:
                log.warning("could not reserve tokens; allowing the call", exc_info=True)
                return None
            if refusal is None:
                return held
            if refusal.full or time.monotonic() - waited > WAIT_AT_MOST:
                account = refusal.account
                whose = "this server's" if account.user == SERVER else "your"
                needs = cost if cost > limited[account] and not await self._used_up(
                    account, limited[account]) else 0
                raise OverQuota(whose, limited[account], user_id, needs=needs)
            settled = self._settled
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(settled.wait(), RETRY_EVERY[min(tries,
                                                                       len(RETRY_EVERY) - 1)])
            tries += 1

    async def _used_up(self, account: UsageKey, limit: int) -> bool:
        """Whether ``account``'s settled count today has reached ``limit`` (then the notice
        says the allowance is used, not that it is too small for one call)."""
        assert self.store is not None
        try:
            used = await self.store.tokens_used(self.day(), [account])
        except StoreError:
            return True
        return used.get(account, 0) >= limit

    async def _reserve_once(self, held: Reservation, limited: dict[UsageKey, int],
                            now: float) -> Refusal | None:
        """One try; a reservation made for a caller cancelled meanwhile is settled to zero
        when it commits, instead of holding budget until it expires."""
        assert self.store is not None
        attempt = asyncio.ensure_future(self.store.reserve_tokens(
            held.day, limited, held.cost, rid=held.rid, now=now,
            expires_at=now + RESERVATION_TTL))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            attempt.add_done_callback(lambda done: self._abandoned(done, held, list(limited)))
            raise

    def _abandoned(self, done: asyncio.Future[Refusal | None], held: Reservation,
                   accounts: list[UsageKey]) -> None:
        if not done.cancelled() and done.exception() is None and done.result() is None:
            self._cleanups.add(task := asyncio.ensure_future(
                self.settle(held, accounts, "", 0)))
            task.add_done_callback(self._cleanups.discard)

    async def settle(self, held: Reservation | None, accounts: list[UsageKey], kind: str,
                     tokens: int) -> None:
        """End ``held`` with the ``tokens`` the call used (counted on ``accounts``); with
        no reservation, just count them."""
        if self.store is None:
            return
        try:
            if held is None:
                if tokens > 0:
                    await self.store.add_tokens(self.day(), accounts, tokens, kind=kind)
            else:
                await self.store.settle_tokens(held.rid, held.day, accounts, tokens, kind=kind)
        except StoreError:  # the reservation expires; the tokens go uncounted
            log.error("could not count %d tokens for %s", tokens, accounts, exc_info=True)
        finally:
            self._settled.set()  # wake calls waiting for room
            self._settled = asyncio.Event()

    def later(self, accounts: list[UsageKey], kind: str, tokens: int) -> None:
        """Count ``tokens`` for accounts without a limit at the next flush."""
        if tokens <= 0:
            return
        day = self.day()
        for account in accounts:
            k = (day, account, kind)
            self._pending[k] = self._pending.get(k, 0) + tokens
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_EVERY)
        await self.flush()

    async def flush(self) -> None:
        """Write the counts added up in memory."""
        pending, self._pending = self._pending, {}
        for (day, account, kind), tokens in pending.items():
            if self.store is not None:
                try:
                    await self.store.add_tokens(day, [account], tokens, kind=kind)
                except StoreError:
                    log.error("could not count %d tokens for %s", tokens, account, exc_info=True)

    async def close(self) -> None:
        """Stop the flush timer, write what is pending, and finish settling reservations
        made for callers cancelled meanwhile."""
        if self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.flush()

    # ------------------------------------------------------------------ telling people

    async def refused(self, error: OverQuota, key: ChannelKey, user_id: str) -> Reply | None:
        """The private notice for a refused reply the first time today, else nothing."""
        log.info("%s in %s is over %s daily token limit", user_id, key, error.whose)
        if self.store is None:
            return None
        try:
            first = await self.store.claim_quota_notice(
                self.day(), UsageKey(key.platform, key.workspace, user_id))
        except StoreError:
            return None
        return Reply(error.user_message, failed=True, private=True) if first else None

    async def usage(self, key: ChannelKey, user_id: str) -> dict[UsageKey, dict[str, int]]:
        """Today's counts of the person and their server by kind; ``""`` holds what was
        counted without a kind (before the counts were kept per kind)."""
        if self.store is None:
            return {}
        day = self.day()
        accounts = self.accounts(key, user_id, direct=False)
        totals = await self.store.tokens_used(day, accounts)
        kinds = await self.store.tokens_by_kind(day, accounts)
        out: dict[UsageKey, dict[str, int]] = {}
        for account in accounts:
            counts = dict(kinds.get(account, {}))
            unkinded = totals.get(account, 0) - sum(counts.values())
            if unkinded > 0:
                counts[""] = unkinded
            for (d, a, kind), n in self._pending.items():
                if d == day and a == account:
                    counts[kind] = counts.get(kind, 0) + n
            out[account] = counts
        return out


class Bill:
    """Who pays for the model calls of one reply, command, digest or background summary;
    the LLM gateway's payer (``bot.channels.usage_tab.Payer``). Limits are read per call, from
    ``settings`` or the channel's current settings."""

    def __init__(self, quota: Quota, key: ChannelKey, accounts: list[UsageKey], kind: str,
                 settings: ChannelSettings | None = None) -> None:
        self.quota, self.key, self.accounts, self.kind = quota, key, accounts, kind
        self.settings = settings
        self.user = next((a.user for a in accounts if a.user != SERVER), "")

    async def limited(self) -> dict[UsageKey, int]:
        """The accounts of this bill that have a limit now, and their limits."""
        settings = self.settings
        if settings is None:
            if self.quota.settings_of is None:
                return {}
            settings = await self.quota.settings_of(self.key)
        return Quota.limits(settings, self.accounts)

    async def run(self, purpose: str, call: Callable[[], Awaitable[T]], *, cost: Cost) -> T:
        """``await call()`` admitted by a reservation of ``cost()`` tokens and settled to
        what it used (see the module docstring)."""
        limited = await self.limited()
        if not limited:  # the cheap path: no reservation, the count written later
            with open_tab() as tab:
                try:
                    return await call()
                finally:
                    self.quota.later(self.accounts, self.kind, tab.total)
        held = await self.quota.reserve(limited, cost(), self.user)
        with open_tab() as tab:
            try:
                return await call()
            finally:  # settled even if the caller is cancelled (preempted) meanwhile
                await asyncio.shield(self.quota.settle(held, self.accounts, self.kind,
                                                       tab.total))

    @contextlib.asynccontextmanager
    async def hold(self, purpose: str, *, cost: Cost) -> AsyncIterator[UsageTab]:
        """The same around a stream: yields the tab the stream notes its usage on."""
        limited = await self.limited()
        tab = UsageTab()
        if not limited:
            try:
                yield tab
            finally:
                self.quota.later(self.accounts, self.kind, tab.total)
            return
        held = await self.quota.reserve(limited, cost(), self.user)
        try:
            yield tab
        finally:
            await asyncio.shield(self.quota.settle(held, self.accounts, self.kind, tab.total))


@dataclass(frozen=True, slots=True)
class Reservation:
    """``cost`` tokens held for one call on ``day`` under id ``rid`` until it settles."""

    rid: str
    day: str
    cost: int
