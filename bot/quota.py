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

__all__ = ["OVER_QUOTA", "Quota", "Verdict", "utc_day"]

log = logging.getLogger(__name__)

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
                if spent[0] > 0:
                    await self._add(accounts, spent[0])

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

    async def charge_server(self, key: ChannelKey, tokens: int) -> None:
        """Count a summary's tokens against ``key``'s server."""
        if key.platform != "console":
            await self._add([UsageKey(key.platform, key.workspace)], tokens)

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
        return await self.store.tokens_used(self.day(), self.accounts(key, user_id, direct=False))
