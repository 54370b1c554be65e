"""Scheduled digests: ``/digest daily 09:00 [zone]``, ``/digest weekly mon 09:00 [zone]``,
``/digest off``, ``/digest now``, and the scheduler that posts them exactly once.

Exactly once, across replicas and restarts: a schedule names local wall-clock slots (DST
included). Each tick the scheduler takes every schedule's latest slot not after now; if
it is new, the scheduler **claims** it in the database (``claim_digest_slot``, a row per
channel and slot) and only the claimer posts, then marks it ``posted`` or ``skipped``. A
process down at 09:00 posts that slot late, once, never the older ones it missed. A
claimer that dies leaves a claim that expires after ``claim_ttl``; its messages went
through the outbox (``bot.conversation.outbox``), so the retry does not post twice. A digest refused
by a daily token limit (``bot.channels.quota``) is neither posted nor marked: its claim expires and
the slot is tried again when the limit allows, unless the next slot has come.

A channel the access lists (``bot.access``) keep the bot out of when a slot comes gets no
digest for it (skipped, logged), though it was scheduled before the channel was blocked;
nor does a direct conversation whose person (who scheduled it) the lists refuse by then.
A slot's period runs from the previous slot to it; the digest is ``bot.catchup.gather``'s of
what everyone in the channel may read (``bot.catchup.visibility``), posted through the platform's
``Outlet`` (with ``thread``: the heading in the channel, the points in a thread under it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from datetime import time as clock_time
from typing import Protocol
from zoneinfo import ZoneInfo

from bot.arguments import Usage
from bot.catchup.command import Catchups, Where
from bot.catchup.digest_request import DIGEST, USAGE, DigestRequest, read_digest
from bot.catchup.gather import Period
from bot.catchup.since import WEEKDAYS
from bot.catchup.text import when
from bot.channels.usage_tab import Payer, paying
from bot.messages import CommandResult
from bot.stores.digests import DigestSchedule, DigestStore
from memory.errors import CallRefused
from memory.models import ChannelKey

__all__ = ["DigestScheduler", "Outlet", "latest_slot", "parse_digest", "previous_slot"]

log = logging.getLogger(__name__)


class Outlet(Protocol):
    """How the scheduler reaches a platform: a channel's ``Where`` and posting to it."""

    async def where(self, key: ChannelKey) -> Where:
        """The channel with its threads and linker."""

    async def post(self, key: ChannelKey, text: str, *, slot_at: float,
                   in_thread: bool = False) -> None:
        """Post ``text`` (Markdown) in the channel for everyone; with ``in_thread``, its
        first line in the channel and the rest in a thread under it. Each message goes
        through the outbox (``bot.conversation.outbox.digest_id`` of ``slot_at``), so a retry of the
        slot after a crash finds what was posted instead of posting it again."""


def _at(day: datetime, minute: int, zone: ZoneInfo) -> float:
    return datetime.combine(day.date(), clock_time(minute // 60, minute % 60),
                            tzinfo=zone).timestamp()


def latest_slot(s: DigestSchedule, now: float) -> float:
    """The newest slot of ``s`` at or before ``now`` (unix seconds)."""
    zone = ZoneInfo(s.tz)
    local = datetime.fromtimestamp(now, UTC).astimezone(zone)
    step = 1 if s.every == "daily" else 7
    day = local if s.every == "daily" else local - timedelta(days=(local.weekday() - s.weekday) % 7)
    slot = _at(day, s.minute, zone)
    while slot > now:
        day -= timedelta(days=step)
        slot = _at(day, s.minute, zone)
    return slot


def previous_slot(s: DigestSchedule, slot: float) -> float:
    """The slot before ``slot``: the same local time a day (or a week) earlier."""
    zone = ZoneInfo(s.tz)
    local = datetime.fromtimestamp(slot, UTC).astimezone(zone)
    return _at(local - timedelta(days=1 if s.every == "daily" else 7), s.minute, zone)


def parse_digest(text: str, key: ChannelKey, *, default_zone: str, now: float,
                 by: str = "") -> DigestSchedule | str:
    """A schedule from ``daily HH:MM [zone] [thread]`` / ``weekly <day> HH:MM [zone]
    [thread]``, or one of the words ``off``, ``now``, ``status``; ``SinceError`` for
    anything else (``bot.commands.digest`` reads the words)."""
    return _schedule(read_digest(text), key, default_zone=default_zone, now=now, by=by)


def _schedule(request: DigestRequest, key: ChannelKey, *, default_zone: str, now: float,
              by: str) -> DigestSchedule | str:
    if request.action not in ("daily", "weekly"):
        return request.action
    return DigestSchedule(key, request.action, request.weekday, request.minute,
                          request.zone or default_zone, now, by, request.in_thread)


def describe(s: DigestSchedule, now: float) -> str:
    """``Daily digest at 09:00 (Europe/Berlin); next: Tue 01 Dec 09:00``."""
    zone = ZoneInfo(s.tz)
    nxt = latest_slot(s, now)
    while nxt <= now:
        local = datetime.fromtimestamp(nxt, UTC).astimezone(zone)
        nxt = _at(local + timedelta(days=1 if s.every == "daily" else 7), s.minute, zone)
    at = f"{s.minute // 60:02d}:{s.minute % 60:02d}"
    kind = "Daily digest" if s.every == "daily" else f"Weekly digest on {WEEKDAYS[s.weekday]}s"
    where = ", in a thread" if s.in_thread else ""
    return f"{kind} at {at} ({s.tz}){where}; next: {when(nxt, zone)}"


class DigestScheduler:
    """``/digest`` and the posting loop (see the module docstring)."""

    def __init__(self, store: DigestStore, catchups: Catchups, *, default_zone: str = "UTC",
                 interval: float = 30.0, claim_ttl: float = 600.0,
                 clock: Callable[[], float] = time.time, owner: str | None = None,
                 payer: Callable[[ChannelKey], Payer | None] = lambda key: None,
                 kept_out: Callable[[Where, str], Awaitable[bool]] | None = None) -> None:
        self.store, self.catchups, self.payer = store, catchups, payer
        self.kept_out = kept_out  # the access lists on a channel (bot.access)
        self.default_zone, self.interval, self.claim_ttl = default_zone, interval, claim_ttl
        self.clock = clock
        self.owner = owner or uuid.uuid4().hex
        self.outlets: dict[str, Outlet] = {}
        self._task: asyncio.Task[None] | None = None

    def add_outlet(self, platform: str, outlet: Outlet) -> None:
        """Let the scheduler post to ``platform`` (an adapter calls this when connected)."""
        self.outlets[platform] = outlet

    async def command(self, where: Where, request: str | DigestRequest, *, allowed: bool,
                      by: str = "", refusal: str = "") -> CommandResult:
        """``/digest …`` in ``where`` (its text, or the request ``bot.commands.digest`` read);
        changing the schedule or posting needs ``allowed``."""
        now = self.clock()
        read = DIGEST.parse(request) if isinstance(request, str) else request
        if isinstance(read, Usage):
            return CommandResult(read.text, ok=False)
        parsed = _schedule(read, where.key, default_zone=self.default_zone, now=now, by=by)
        if parsed == "status":
            current = await self.store.digest_schedule(where.key)
            if current is None:
                return CommandResult("No digest is scheduled here. " + USAGE)
            return CommandResult(describe(current, now) + ".")
        if not allowed:
            return CommandResult(refusal or "You are not allowed to manage digests here.",
                                 ok=False)
        if parsed == "off":
            gone = await self.store.delete_digest_schedule(where.key)
            return CommandResult("Digests are off for this channel." if gone
                                 else "No digest was scheduled here.")
        if parsed == "now":
            current = await self.store.digest_schedule(where.key)
            days = 7 if current is not None and current.every == "weekly" else 1
            zone = ZoneInfo(current.tz if current else self.default_zone)
            period = Period(now - days * 86400, now, "last 7 days" if days == 7 else "last day")
            result = await self.catchups.run(where, period, zone, title="Digest", public=True)
            return CommandResult(result.text, ok=not result.refused)
        assert isinstance(parsed, DigestSchedule)
        await self.store.set_digest_schedule(parsed)
        return CommandResult(f"Scheduled. {describe(parsed, now)}. "
                             "Each is posted here once, and skipped when nothing was said.")

    async def tick(self) -> int:
        """Post every due slot this process wins; return how many it posted."""
        posted = 0
        now = self.clock()
        for s in await self.store.digest_schedules():
            outlet = self.outlets.get(s.key.platform)
            if outlet is None:
                continue
            try:
                with paying(self.payer(s.key)):  # the server pays (bot.channels.quota)
                    posted += await self._slot(s, outlet, now)
            except CallRefused as e:
                log.info("digest of %s not posted: %s; its claim expires and it is tried "
                         "again", s.key, e)
            except Exception:
                log.exception("digest of %s failed; its claim expires and it is retried", s.key)
        return posted

    async def _slot(self, s: DigestSchedule, outlet: Outlet, now: float) -> int:
        slot = latest_slot(s, now)
        if slot < s.created_at:
            return 0  # the schedule did not exist yet at that slot
        if not await self.store.claim_digest_slot(s.key, slot, self.owner, self.claim_ttl):
            return 0  # posted (or being posted) by another replica or an earlier run
        where = await outlet.where(s.key)
        if self.kept_out is not None and await self.kept_out(where, s.created_by):
            log.warning("digest of %s not posted: the access lists keep the bot out of the "
                        "channel (or away from the person of a direct conversation)", s.key)
            await self.store.finish_digest_slot(s.key, slot, self.owner, "skipped")
            return 0
        title = "Daily digest" if s.every == "daily" else "Weekly digest"
        period = Period(previous_slot(s, slot), slot, "period")
        result = await self.catchups.run(where, period, ZoneInfo(s.tz), title=title, public=True)
        if result.refused:
            log.warning("digest of %s not posted: not everyone who can see the channel may "
                        "read its history", s.key)
        if result.empty:
            await self.store.finish_digest_slot(s.key, slot, self.owner, "skipped")
            return 0
        if now - slot > self.interval * 2:
            log.info("posting the %s digest of %s late (slot %s)", s.every, s.key, slot)
        await outlet.post(s.key, result.text, slot_at=slot, in_thread=s.in_thread)
        await self.store.finish_digest_slot(s.key, slot, self.owner, "posted")
        return 1

    async def run(self) -> None:
        """Tick every ``interval`` seconds until cancelled; a failed tick is logged."""
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("digest scheduler tick failed")
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        """Run the loop in the background (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        """Stop the loop; a digest being posted is cancelled (its claim expires)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
