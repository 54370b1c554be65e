"""The missed-mention sweep: answers the mentions whose reply is still owed (``bot.missed.owed``)
once their claim has run out — the process was killed mid-reply, a delivery failed, or a
backfill found a mention posted while the bot was down.

Every adapter starts :func:`answer_missed_mentions` when it connects: a sweep at once, then
one every third of ``REPLY_CLAIM_SECONDS`` (a dead replica's claims run out later). Each
late answer goes through the adapter's ``ReplyFlow``, into the placeholder the first attempt
showed. A mention older than ``ANSWER_MISSED_SECONDS`` or tried ``MAX_ATTEMPTS`` times is
given up (logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from bot.conversation.reply_flow import ReplyFlow
from bot.conversation.service import ChatService
from bot.messages import Refresh
from bot.missed.owed import OwedReplies

__all__ = ["MAX_ATTEMPTS", "Owing", "answer_missed_mentions", "stop_answering_missed",
           "sweep_missed"]

log = logging.getLogger(__name__)

class Owing(Protocol):
    """What a sweep is handed (``bot.parts.Features`` is one): the service that answers
    late and the replies owed."""

    @property
    def service(self) -> ChatService: ...

    @property
    def owed(self) -> OwedReplies | None: ...


MAX_ATTEMPTS = 3  # deliveries tried for one mention before it is given up (logged)


async def sweep_missed(parts: Owing, platform: str, flow: ReplyFlow,
                       *, limit: int = 20, stop: asyncio.Event | None = None,
                       refresh: Refresh | None = None) -> int:
    """Answer ``platform``'s owed mentions whose claim ran out; drop (and log) those too old
    or tried too often, or refused by the access lists as they stand now (``refresh``: the
    adapter's word on who and where each author is now). Returns how many were answered."""
    owed = parts.owed
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
            pending = await parts.service.answer(item, refresh)
            if pending is None:  # gone (deleted, /reset) or refused now: nothing to answer
                delivered = True
                continue
            log.info("answering %s in %s, left unanswered by a crash or a failed delivery",
                     item.message_id, item.key)
            delivered = await flow.deliver(pending)  # settles (or releases) the debt
            answered += delivered
        except Exception:
            log.exception("answering the missed mention %s in %s failed", item.message_id,
                          item.key)
        finally:
            await asyncio.shield(owed.finished(item.key, item.message_id, delivered=delivered))
    return answered


async def answer_missed_mentions(parts: Owing, platform: str, flow: ReplyFlow,
                                 stop: asyncio.Event | None = None,
                                 refresh: Refresh | None = None) -> None:
    """Startup hook of every adapter: answer the mentions a crash left unanswered now, then
    keep sweeping (a dead replica's claims run out later) until cancelled or ``stop`` (an
    answer being delivered then is finished first: :func:`stop_answering_missed`);
    ``refresh``: see :func:`sweep_missed`."""
    owed = parts.owed
    if owed is None:
        return
    interval = max(0.5, min(5.0, owed.claim_seconds / 3))
    first = True
    while stop is None or not stop.is_set():
        answered = 0
        try:
            while (n := await sweep_missed(parts, platform, flow, stop=stop,
                                           refresh=refresh)) > 0:
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
