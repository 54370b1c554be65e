"""Mentions are answered once, even across crashes, restarts and replicas.

An addressed message is recorded together with the reply it is owed (``ReplyDue``, in the
turn's own transaction), claimed by this process while it answers. The adapter reports
the delivery (``ChatService.delivered``): delivered settles the debt, failed or cut short
by shutdown releases it. Whatever is still owed — the process was killed mid-reply, the
delivery failed — is claimed again by :func:`answer_missed_mentions` (every adapter's
startup hook, then a periodic sweep) once the dead owner's claim has run out, if the
message is younger than ``ANSWER_MISSED_SECONDS``; older debts are dropped and logged. A
platform's re-delivery of such a message claims it too, so it is answered, not dropped as
a duplicate. Claims are conditional updates in the database, so two replicas never both
answer; a live claim is renewed every third of ``REPLY_CLAIM_SECONDS``.

Other paths that record a mention nobody is answering yet (say, a backfill after downtime)
record it with ``ReplyDue("", claim_seconds, route)``: unclaimed, so the next sweep answers
it if it is young enough.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bot.messages import IncomingMessage, Reply
from memory.models import ChannelKey, OwedReply, ReplyDue
from memory.store import ReplyLedger

if TYPE_CHECKING:
    from bot.service import ChatService

__all__ = [
    "MAX_ATTEMPTS",
    "Deliver",
    "OwedReplies",
    "answer_missed_mentions",
    "answer_owed",
    "stop_answering_missed",
    "sweep_missed",
]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # deliveries tried for one mention before it is given up (logged)
Deliver = Callable[[OwedReply, Reply], Awaitable[bool]]


class OwedReplies:
    """This process's side of the reply ledger: its owner id, the debts it is answering
    now (renewed in the background), and the settle/release after each delivery."""

    def __init__(self, ledger: ReplyLedger, *, claim_seconds: float = 30.0,
                 answer_missed_seconds: float = 300.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.ledger = ledger
        self.claim_seconds = claim_seconds
        self.answer_missed_seconds = answer_missed_seconds
        self.clock = clock
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._inflight: set[tuple[ChannelKey, str]] = set()
        self._renewer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start renewing the claims of replies in flight."""
        if self._renewer is None:
            self._renewer = asyncio.get_running_loop().create_task(self._renew())

    async def close(self) -> None:
        """Stop renewing; claims still held run out (or were released by the adapters)."""
        task, self._renewer = self._renewer, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.claim_seconds / 3)
            try:
                await self.ledger.renew_owed(self.owner, sorted(self._inflight),
                                             self.claim_seconds)
            except Exception:
                log.warning("could not renew the claims on replies in flight", exc_info=True)

    # ------------------------------------------------------------------ the reply path

    def due(self, msg: IncomingMessage) -> ReplyDue | None:
        """The debt to record with an addressed message (the console owes nothing: its
        replies are printed in the same process or not at all)."""
        if msg.key.platform == "console":
            return None
        return ReplyDue(self.owner, self.claim_seconds, msg.route)

    def answering(self, key: ChannelKey, message_id: str) -> None:
        """This process now answers the message (its claim is renewed until ``finished``)."""
        self._inflight.add((key, message_id))

    def is_answering(self, key: ChannelKey, message_id: str) -> bool:
        """Whether this process is answering the message right now."""
        return (key, message_id) in self._inflight

    def young(self, sent_at: float) -> bool:
        """Whether a message is recent enough to be answered late."""
        return self.clock() - sent_at <= self.answer_missed_seconds

    async def redelivered(self, msg: IncomingMessage) -> bool:
        """A re-delivery of a recorded message: True when its reply is still owed and this
        process now claims it (so it is answered, not dropped as a duplicate)."""
        if msg.key.platform == "console" or self.is_answering(msg.key, msg.message_id):
            return False
        if not self.young(msg.sent_at):
            return False
        owed = await self.ledger.claim_owed(msg.key, msg.message_id, self.owner,
                                            self.claim_seconds)
        if owed is None:
            return False
        log.info("answering %s in %s, re-delivered and never answered", msg.message_id,
                 msg.key)
        self.answering(msg.key, msg.message_id)
        return True

    async def showing(self, key: ChannelKey, message_id: str, placeholder: str) -> None:
        """Remember the message shown while answering (``""``: none any more), so a late
        answer replaces it (``bot.outbox``); a failure is logged, not raised."""
        try:
            await self.ledger.owed_placeholder(key, message_id, self.owner, placeholder)
        except Exception:
            log.warning("could not remember the placeholder of %s in %s", message_id, key,
                        exc_info=True)

    async def finished(self, key: ChannelKey, message_id: str, *, delivered: bool) -> None:
        """Settle the debt (``delivered``) or release it to be answered again later."""
        if (key, message_id) not in self._inflight:
            return
        self._inflight.discard((key, message_id))
        try:
            if delivered:
                await self.ledger.settle_owed(key, message_id)
            else:
                await self.ledger.release_owed(key, message_id, self.owner)
        except Exception:  # the claim runs out by itself; the mention is answered then
            log.warning("could not %s the reply owed to %s in %s",
                        "settle" if delivered else "release", message_id, key, exc_info=True)


async def answer_owed(service: ChatService, owed: OwedReply) -> Reply | None:
    """Answer a recorded message whose reply was never delivered; None when the message is
    gone (deleted, ``/reset``)."""
    found = await service.memory.store.turns_at(owed.key, [owed.seq])
    if not found or found[0].message_id != owed.message_id:
        return None
    t = found[0]
    msg = IncomingMessage(t.key, t.message_id, t.author_id, t.author_name, t.text, t.sent_at,
                          mentions_bot=True, route=owed.route)
    return await service.answer(msg, t.seq)


async def sweep_missed(service: ChatService, platform: str, deliver: Deliver,
                       *, limit: int = 20, stop: asyncio.Event | None = None) -> int:
    """Answer ``platform``'s owed mentions whose claim ran out; drop (and log) those too old
    or tried too often. Returns how many were answered."""
    owed = service.owed
    if owed is None:
        return 0
    now = owed.clock()
    for gone in await owed.ledger.expire_owed(
        platform, before=now - owed.answer_missed_seconds, max_attempts=MAX_ATTEMPTS
    ):
        why = (f"tried {gone.attempts} times" if gone.attempts >= MAX_ATTEMPTS else
               f"{now - gone.sent_at:.0f} s old, over ANSWER_MISSED_SECONDS "
               f"({owed.answer_missed_seconds:g})")
        log.warning("not answering message %s in %s, left unanswered: %s", gone.message_id,
                    gone.key, why)
    answered = 0
    if owed.answer_missed_seconds <= 0:
        return 0
    # One claim at a time: a claim counts an attempt, so a batch claimed at once would charge
    # every mention in it when a kill cuts the first answer short (after MAX_ATTEMPTS such
    # kills, mentions never tried would be given up).
    for _ in range(limit):
        if stop is not None and stop.is_set():  # shutting down: the rest stay due
            break
        batch = await owed.ledger.claim_due(platform, owed.owner, owed.claim_seconds,
                                            since=now - owed.answer_missed_seconds, limit=1)
        if not batch:
            break
        item = batch[0]
        owed.answering(item.key, item.message_id)
        delivered = False
        try:
            reply = await answer_owed(service, item)
            if reply is None:  # the message is gone (deleted, /reset): nothing to answer
                delivered = True
                continue
            log.info("answering %s in %s, left unanswered by a crash or a failed delivery",
                     item.message_id, item.key)
            delivered = await deliver(item, reply)
            answered += delivered
        except Exception:
            log.exception("answering the missed mention %s in %s failed", item.message_id,
                          item.key)
        finally:
            await asyncio.shield(owed.finished(item.key, item.message_id, delivered=delivered))
    return answered


async def answer_missed_mentions(service: ChatService, platform: str, deliver: Deliver,
                                 stop: asyncio.Event | None = None) -> None:
    """Startup hook of every adapter: answer the mentions a crash left unanswered now, then
    keep sweeping (a dead replica's claims run out later) until cancelled or ``stop`` (an
    answer being delivered then is finished first: :func:`stop_answering_missed`)."""
    owed = service.owed
    if owed is None:
        return
    interval = max(0.5, min(5.0, owed.claim_seconds / 3))
    first = True
    while stop is None or not stop.is_set():
        answered = 0
        try:
            while (n := await sweep_missed(service, platform, deliver, stop=stop)) > 0:
                answered += n
        except Exception:
            log.warning("sweeping %s for unanswered mentions failed", platform, exc_info=True)
        if first:  # the startup sweep; a dead replica's live claims are swept later
            log.info("%s: %d mentions left unanswered before the start answered", platform,
                     answered)
            first = False
        if stop is None:
            await asyncio.sleep(interval)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)


async def stop_answering_missed(task: asyncio.Task[None] | None, stop: asyncio.Event,
                                grace: float) -> None:
    """Stop the sweep of :func:`answer_missed_mentions`: let a late answer being delivered
    finish within ``grace`` seconds, then cancel (its debt is released either way)."""
    stop.set()
    if task is None or task is asyncio.current_task():
        return
    done, _ = await asyncio.wait({task}, timeout=grace)
    if not done:
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)
