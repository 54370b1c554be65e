"""Mentions are answered once, even across crashes, restarts and replicas.

An addressed message is recorded together with the reply it is owed (``ReplyDue``, in the
turn's own transaction), claimed by this process while it answers. The adapter reports
the delivery (``PendingReply.settle``, called by ``bot.conversation.reply_flow``): delivered settles
the debt, failed or cut short by shutdown releases it. Whatever is still owed — the process was
killed mid-reply, the delivery failed — is claimed again by the missed-mention sweep
(``bot.conversation.sweep``: every adapter's startup hook, then a periodic sweep) once the dead
owner's claim has run out, if the message is younger than ``ANSWER_MISSED_SECONDS``; older
debts are dropped and logged. A platform's re-delivery of such a message claims it too, so
it is answered, not dropped as a duplicate. Claims are conditional updates in the database,
so two replicas never both answer; a live claim is renewed every third of ``REPLY_CLAIM_SECONDS``.

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
from collections.abc import Callable

from bot.installed import is_trusted
from bot.messages import IncomingMessage
from bot.stores.owed import ReplyDue, ReplyLedger
from memory.models import ChannelKey

__all__ = ["OwedReplies"]

log = logging.getLogger(__name__)


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
        """The debt to record with an addressed message (a trusted platform, the operator's
        terminal, owes nothing: its replies are printed in the same process or not at all)."""
        if is_trusted(msg.key.platform):
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
        if is_trusted(msg.key.platform) or self.is_answering(msg.key, msg.message_id):
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
        answer replaces it (``bot.conversation.outbox``); a failure is logged, not raised."""
        try:
            await self.ledger.owed_placeholder(key, message_id, self.owner, placeholder)
        except Exception:
            log.warning("could not remember the placeholder of %s in %s", message_id, key,
                        exc_info=True)

    async def finished(self, key: ChannelKey, message_id: str, *, delivered: bool,
                       recorded: bool = False) -> None:
        """Settle the debt (``delivered``) or release it to be answered again later.
        ``recorded``: delivered, and settled already in the transaction that recorded the
        answer's last post (``bot.conversation.outbox``): nothing more to write."""
        if (key, message_id) not in self._inflight:
            return
        self._inflight.discard((key, message_id))
        if delivered and recorded:
            return
        try:
            if delivered:
                await self.ledger.settle_owed(key, message_id)
            else:
                await self.ledger.release_owed(key, message_id, self.owner)
        except Exception:  # the claim runs out by itself; the mention is answered then
            log.warning("could not %s the reply owed to %s in %s",
                        "settle" if delivered else "release", message_id, key, exc_info=True)
