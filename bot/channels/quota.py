"""Daily token quotas: ``DAILY_TOKENS_PER_USER`` and ``DAILY_TOKENS_PER_SERVER`` (0 = no
limit; a server may set lower ones with ``/config``), counted per UTC day in the database.

Every model call is metered at the LLM gateway (``bot.channels.usage_tab``): the caller opens a
``Bill`` naming who pays and the kind of call (``KINDS``); the gateway asks it to admit
each call and charges the usage the provider reported. A reply, ``/summary`` and
``/catchup`` are paid by the person and their server; a digest and a background summary
by the server; in a direct message only the person; the console never. The offline
model costs nothing.

Across replicas the counts are read from the database before each call, which is refused
(``OverQuota``) at or over a limit. Within a process the check, call and charge hold the
account's one-slot ``LLMGate``, so the overshoot is at most one request per replica; the
cost is one call at a time per limited account. Limited accounts' counts are written
before their next call; others are added up in memory and written every ``FLUSH_EVERY``
seconds and at close.

A person past their quota is told once a day, privately (claimed in the database, so once
across replicas); their messages are still remembered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import TypeVar

from bot.channels.config import ChannelSettings
from bot.channels.usage_tab import UsageTab, open_tab, paying
from bot.errors import OVER_QUOTA, OverQuota
from bot.llm.gate import LLMGate
from bot.messages import Reply
from bot.stores.settings import SERVER
from bot.stores.usage import UsageKey, UsageStore
from memory.errors import StoreError
from memory.models import ChannelKey

__all__ = [
    "FLUSH_EVERY", "KINDS", "OVER_QUOTA", "PERSONAL_KINDS", "Bill", "Quota", "is_direct",
    "utc_day",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

FLUSH_EVERY = 1.0  # seconds between writes of counts no limit is waiting for
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


def is_direct(key: ChannelKey) -> bool:
    """Whether ``key`` is a direct-message channel, by the adapters' key conventions:
    Discord's workspace ``dm``, Slack's ``D…`` channel ids."""
    return key.workspace == "dm" or (key.platform == "slack" and key.channel.startswith("D"))


class Quota:
    """Counts tokens per person and server per UTC day, per kind; opens the bills that
    the LLM gateway admits and charges calls with. ``settings_of`` gives a channel's
    limits (``ChannelConfig.get``)."""

    def __init__(self, store: UsageStore | None, *, settings_of: SettingsOf | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.settings_of, self.clock = store, settings_of, clock
        self._gates = weakref.WeakValueDictionary[UsageKey, LLMGate]()
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
        nobody does (the console, no store, a background call in a direct message)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {tuple(KINDS)}, not {kind!r}")
        if self.store is None or key.platform == "console":
            return None
        user = user_id if kind in PERSONAL_KINDS else ""
        accounts = self.accounts(key, user, direct=is_direct(key) if direct is None else direct)
        return Bill(self, key, accounts, kind, settings) if accounts else None

    @contextlib.contextmanager
    def paying(self, key: ChannelKey, kind: str, user_id: str = "", *,
               direct: bool | None = None, settings: ChannelSettings | None = None
               ) -> Iterator[None]:
        """Model calls made inside the block are metered on :meth:`bill`'s bill."""
        with paying(self.bill(key, kind, user_id, direct=direct, settings=settings)):
            yield

    # ------------------------------------------------------------------ the bill's steps

    def gates(self, limited: dict[UsageKey, int]) -> list[LLMGate]:
        """The gates of the limited accounts, in one order (so two calls never deadlock)."""
        out = []
        for account in sorted(limited, key=lambda a: a.user):
            gate = self._gates.get(account)
            if gate is None:
                gate = self._gates[account] = LLMGate(1)
            out.append(gate)
        return out

    async def check(self, limited: dict[UsageKey, int], user_id: str) -> None:
        """Raise ``OverQuota`` when an account is at or over its limit today."""
        if not limited or self.store is None:
            return
        try:
            used = await self.store.tokens_used(self.day(), list(limited))
        except StoreError:
            log.warning("could not read token usage; allowing the call", exc_info=True)
            return
        for account, limit in limited.items():
            if used.get(account, 0) >= limit:
                whose = "this server's" if account.user == SERVER else "your"
                raise OverQuota(whose, limit, user_id)

    async def add(self, accounts: list[UsageKey], kind: str, tokens: int) -> None:
        """Count ``tokens`` now (the accounts have a limit that waits for it)."""
        if self.store is None or tokens <= 0:
            return
        try:
            await self.store.add_tokens(self.day(), accounts, tokens, kind=kind)
        except StoreError:
            log.error("could not count %d tokens for %s", tokens, accounts, exc_info=True)

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
        """Stop the flush timer and write what is pending."""
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

    async def run(self, purpose: str, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()`` admitted and charged (see the module docstring); a background
        summary waiting on an account's gate gives way to interactive calls."""
        limited = await self.limited()
        if not limited:  # the cheap path: no lock, no read, the count written later
            with open_tab() as tab:
                try:
                    return await call()
                finally:
                    self.quota.later(self.accounts, self.kind, tab.total)

        async def checked() -> T:
            await self.quota.check(limited, self.user)
            with open_tab() as tab:
                try:
                    return await call()
                finally:  # counted even if the caller is cancelled (preempted) meanwhile
                    await asyncio.shield(self.quota.add(self.accounts, self.kind, tab.total))

        return await _through(self.quota.gates(limited), purpose, checked)

    @contextlib.asynccontextmanager
    async def hold(self, purpose: str) -> AsyncIterator[UsageTab]:
        """The same around a stream: yields the tab the stream notes its usage on."""
        limited = await self.limited()
        tab = UsageTab()
        if not limited:
            try:
                yield tab
            finally:
                self.quota.later(self.accounts, self.kind, tab.total)
            return
        async with contextlib.AsyncExitStack() as stack:
            for gate in self.quota.gates(limited):
                await stack.enter_async_context(gate.hold(purpose))
            await self.quota.check(limited, self.user)
            try:
                yield tab
            finally:
                await asyncio.shield(self.quota.add(self.accounts, self.kind, tab.total))


async def _through(gates: list[LLMGate], purpose: str, call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` holding every gate in ``gates``, taken in order."""
    if not gates:
        return await call()
    return await gates[0].run(purpose, lambda: _through(gates[1:], purpose, call))
