"""Daily token quotas: ``DAILY_TOKENS_PER_USER`` and ``DAILY_TOKENS_PER_SERVER`` (0 = no
limit; a server may set lower ones with ``/config``), counted per UTC day in the database.

What counts: the usage the provider reported for each reply (streamed or not,
``bot.usage_tab``) against the person and their server, and for each summary against the
server (``charge_server``). The offline model reports nothing and costs nothing. Direct
messages count against the person only; the console (the operator) is never limited.

Enforcement across replicas: before a reply, the counts are read from the database and the
reply is refused when the person or the server is at or over its limit. Within one process
the check, the model call and the charge run under a lock per limited account, so a process
has at most one reply in flight per limited account that the database does not yet count:
the overshoot is at most one request per replica. The cost is that, while a limit is set,
one process answers one person (or, with a server limit, one server) at a time.

Counting costs a database write. Where a limit applies it is written before the next reply
of that account may start (that is what enforces the limit); where none does, counts are
added up in memory and written once a second (``FLUSH_EVERY``) and at close, so a reply
without a limit costs no extra commit. ``/config usage`` adds this process's unwritten
counts.

A person past their quota is told once per day (claimed in the database, so once across
replicas too) and only privately; their messages are still remembered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.channel_config import ChannelSettings
from bot.messages import Reply
from memory.channel_settings import UsageKey
from memory.errors import StoreError
from memory.models import ChannelKey
from memory.store import SettingsStore

__all__ = ["FLUSH_EVERY", "OVER_QUOTA", "Quota", "Verdict", "utc_day"]

log = logging.getLogger(__name__)

FLUSH_EVERY = 1.0  # seconds between writes of counts no limit is waiting for
OVER_QUOTA = (
    "You have used {what} daily allowance of tokens ({limit:,}). I still remember what you "
    "write here; I can answer again after 00:00 UTC."
)


def utc_day(ts: float) -> str:
    """The UTC date of unix time ``ts``, ``YYYY-MM-DD`` (quotas reset at 00:00 UTC)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a reply may go ahead; when not, whose limit it hit and the account to tell."""

    allowed: bool
    account: UsageKey | None = None
    limit: int = 0
    whose: str = ""  # "your" or "this server's"


class Quota:
    """Counts tokens per person and server per UTC day; refuses replies past a limit."""

    def __init__(self, store: SettingsStore | None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.clock = store, clock
        self._locks = weakref.WeakValueDictionary[UsageKey, asyncio.Lock]()
        self._pending: dict[tuple[str, UsageKey], int] = {}  # unwritten, unlimited counts
        self._flusher: asyncio.Task[None] | None = None

    def day(self) -> str:
        """Today, UTC."""
        return utc_day(self.clock())

    @staticmethod
    def accounts(key: ChannelKey, user_id: str, *, direct: bool) -> list[UsageKey]:
        """The person's account, and their server's unless this is a direct message."""
        person = UsageKey(key.platform, key.workspace, user_id)
        return [person] if direct else [person, UsageKey(key.platform, key.workspace)]

    @staticmethod
    def limits(settings: ChannelSettings, accounts: list[UsageKey]) -> dict[UsageKey, int]:
        """The limited accounts among ``accounts`` and their limits."""
        out = {}
        for account in accounts:
            limit = (settings.daily_tokens_per_server if account.user == ""
                     else settings.daily_tokens_per_user)
            if limit > 0:
                out[account] = limit
        return out

    @contextlib.asynccontextmanager
    async def reply(
        self, key: ChannelKey, user_id: str, settings: ChannelSettings, *, direct: bool
    ) -> AsyncIterator[tuple[Verdict, Callable[[int], None]]]:
        """Around one reply: yields the verdict and ``spend(tokens)``; on exit what was
        spent is added to the person's and server's counts, and the locks are released."""
        if self.store is None or key.platform == "console":
            yield Verdict(True), lambda _: None
            return
        accounts = self.accounts(key, user_id, direct=direct)
        limited = self.limits(settings, accounts)
        spent = [0]

        def spend(tokens: int) -> None:
            spent[0] += tokens

        async with contextlib.AsyncExitStack() as stack:
            for account in sorted(limited, key=lambda a: a.user):  # one order: no deadlock
                lock = self._locks.get(account)
                if lock is None:
                    lock = self._locks[account] = asyncio.Lock()
                await stack.enter_async_context(lock)
            verdict = await self._check(limited)
            try:
                yield verdict, spend
            finally:
                if spent[0] > 0 and limited:
                    await self._add(accounts, spent[0])
                elif spent[0] > 0:
                    self._later(accounts, spent[0])

    async def _check(self, limited: dict[UsageKey, int]) -> Verdict:
        if not limited or self.store is None:
            return Verdict(True)
        try:
            used = await self.store.tokens_used(self.day(), list(limited))
        except StoreError:
            log.warning("could not read token usage; allowing the reply", exc_info=True)
            return Verdict(True)
        for account, limit in limited.items():
            if used.get(account, 0) >= limit:
                whose = "this server's" if account.user == "" else "your"
                return Verdict(False, account, limit, whose)
        return Verdict(True)

    async def _add(self, accounts: list[UsageKey], tokens: int) -> None:
        if self.store is None:
            return
        try:
            await self.store.add_tokens(self.day(), accounts, tokens)
        except StoreError:
            log.error("could not count %d tokens for %s", tokens, accounts, exc_info=True)

    def _later(self, accounts: list[UsageKey], tokens: int) -> None:
        """Count ``tokens`` for accounts without a limit at the next flush."""
        day = self.day()
        for account in accounts:
            self._pending[(day, account)] = self._pending.get((day, account), 0) + tokens
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_EVERY)
        await self.flush()

    async def flush(self) -> None:
        """Write the counts added up in memory."""
        pending, self._pending = self._pending, {}
        for (day, account), tokens in pending.items():
            if self.store is not None:
                try:
                    await self.store.add_tokens(day, [account], tokens)
                except StoreError:
                    log.error("could not count %d tokens for %s", tokens, account, exc_info=True)

    async def close(self) -> None:
        """Stop the flush timer and write what is pending."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.flush()

    async def charge_server(self, key: ChannelKey, tokens: int) -> None:
        """Count a summary's tokens against ``key``'s server (summaries are never refused,
        so the count may wait for the next flush)."""
        if key.platform != "console" and self.store is not None:
            self._later([UsageKey(key.platform, key.workspace)], tokens)

    async def first_notice(self, verdict: Verdict, key: ChannelKey, user_id: str) -> bool:
        """True the first time today this person is refused (tell them once, privately)."""
        if self.store is None:
            return False
        who = UsageKey(key.platform, key.workspace, user_id)
        try:
            return await self.store.claim_quota_notice(self.day(), who)
        except StoreError:
            return False

    async def refused(self, verdict: Verdict, key: ChannelKey, user_id: str) -> Reply | None:
        """The private notice for a refused reply the first time today, else nothing."""
        log.info("%s in %s is over %s daily token limit", user_id, key, verdict.whose)
        if not await self.first_notice(verdict, key, user_id):
            return None
        text = OVER_QUOTA.format(what=verdict.whose, limit=verdict.limit)
        return Reply(text, failed=True, private=True)

    async def usage(self, key: ChannelKey, user_id: str) -> dict[UsageKey, int]:
        """Today's counts of the person and their server."""
        if self.store is None:
            return {}
        day = self.day()
        used = await self.store.tokens_used(day, self.accounts(key, user_id, direct=False))
        return {a: n + self._pending.get((day, a), 0) for a, n in used.items()}
