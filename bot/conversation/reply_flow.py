"""One reply flow for every platform: placeholder, streaming, chunking, delivery, apology and
settling, through a platform's small ``ReplyOutlet`` (post, edit, delete, find, and how it
formats and whispers).

An adapter hands a message to ``ChatService.receive`` and, when a reply is owed, hands the
``PendingReply`` to :meth:`ReplyFlow.deliver`; nothing else about a reply is the adapter's.
The flow runs the reply's job (``bot.conversation.reply_job.ReplyJob``) step by step:

1. shows the outlet's placeholder ("thinking…", Slack), remembered on the debt (``placed``)
   so that a late answer after a crash goes into it (``bot.conversation.outbox``); where
   there is none (Discord), a streamed reply's first text is posted and remembered instead;
2. has the answer made (``make``) inside the outlet's ``working`` indicator (typing, a
   spinner), streamed into the placeholder at most once per ``stream_interval``;
3. delivers it through the outbox, split by the outlet, into the placeholder (or privately:
   the quota notice), settling the debt with its last message (``settled``; the intent to
   post the first was recorded while the answer was made); a "couldn't
   save" notice is told once per message, however often the platform delivers it again;
4. cut short by shutdown before the answer went out, it releases the debt, so the message
   is answered after the restart, and says so in place of the placeholder (a reply nobody
   owes — nothing was recorded — just takes the placeholder away).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from bot.conversation.lookup import looked_up
from bot.conversation.outbox import (
    APOLOGY,
    Intent,
    Outbox,
    Post,
    PostOutlet,
    placeholder_id,
    reply_id,
)
from bot.errors import OutcomeUnknown, user_text
from bot.messages import DeltaSink, IncomingMessage, Outcome, PendingReply, Reply
from bot.ops.shutdown import SHUTDOWN_APOLOGY
from memory.models import ChannelKey

__all__ = ["LiveThrottle", "ReplyFlow", "ReplyOutlet"]

log = logging.getLogger(__name__)
TOLD_LIMIT = 1000  # messages whose "couldn't save" was told, remembered (bounded memory)


class ReplyOutlet(PostOutlet, Protocol):
    """A platform's side of a reply: ``bot.conversation.outbox.PostOutlet`` and how it shows
    things."""

    placeholder: str  # shown while the answer is made; "" for none
    stream_interval: float | None  # seconds between streamed updates; None: not streamed

    def split(self, text: str) -> tuple[list[str], str]:
        """The messages a reply is sent as, and text to attach to the last ("": none)."""

    def preview(self, text: str) -> str:
        """A streamed reply's text so far, as shown while it is still being written."""

    async def whisper(self, msg: IncomingMessage, text: str) -> None:
        """Show ``text`` to the author of ``msg`` only (Slack: ephemeral; Discord: a DM)."""

    def working(self, key: ChannelKey) -> AbstractAsyncContextManager[None]:
        """Shown while the answer is made (typing, a spinner; may be nothing)."""


class LiveThrottle:
    """Lets a streamed reply be shown at most once per ``interval`` seconds.

    ``shown_now``: something was just shown (a placeholder), so the first update waits one
    interval; otherwise the first is shown at once.
    """

    def __init__(self, interval: float, *, clock: Callable[[], float] = time.monotonic,
                 shown_now: bool = False) -> None:
        self.interval, self.clock = interval, clock
        self.last = clock() if shown_now else float("-inf")

    def due(self) -> bool:
        """True (and the time is taken) when the reply may be shown again now."""
        now = self.clock()
        if now - self.last < self.interval:
            return False
        self.last = now
        return True


def reply_to(msg: IncomingMessage) -> str:
    """Where a reply to ``msg`` goes: its route (Slack: the thread), else the message."""
    return msg.route or msg.message_id


class _Shown:
    """The message shown while a reply is made: the placeholder, or a streamed start."""

    def __init__(self, outlet: ReplyOutlet, pending: PendingReply) -> None:
        self.outlet, self.pending, self.msg = outlet, pending, pending.msg
        self.calls = looked_up(outlet)  # posts, edits, deletes: looked up when unknown
        self.id = pending.placeholder
        self.broken = False
        self.throttle: LiveThrottle | None = None

    def post(self, text: str) -> Post:
        key = self.msg.key
        return Post(key, placeholder_id(key, self.msg.message_id), text, reply_to(self.msg))

    async def _posted(self, text: str) -> None:
        self.id = await self.calls.post(self.post(text)) or ""
        self.broken = not self.id
        if self.id:
            await self.pending.job.placed(self.id)

    async def start(self) -> None:
        """Post the outlet's placeholder (none for a notice or a late answer)."""
        if self.pending.late:  # the earlier attempt's, found by its outbox id if need be
            if not self.id:
                with contextlib.suppress(OutcomeUnknown):  # unreadable: answer beside it
                    self.id = await self.calls.find(self.post(self.outlet.placeholder)) or ""
        elif self.outlet.placeholder and not self.pending.notice:
            await self._posted(self.outlet.placeholder)

    def sink(self) -> DeltaSink | None:
        """Where the streamed text goes, if this reply is streamed."""
        interval = self.outlet.stream_interval
        if interval is None or self.pending.notice or self.pending.late:
            return None
        self.throttle = LiveThrottle(interval, shown_now=bool(self.id))
        return self.show

    async def show(self, text: str) -> None:
        if self.broken or self.throttle is None or not self.throttle.due():
            return
        preview = self.outlet.preview(text)
        if not self.id:
            await self._posted(preview)
        elif not await self.calls.edit(self.post(preview), self.id):
            self.broken = True

    async def drop(self) -> None:
        """Delete it (nothing is sent, or the answer goes privately)."""
        if self.id:
            await self.calls.delete(self.msg.key, self.id)
            self.id = ""

    async def apologize(self) -> None:
        """Shutdown cut the reply short: an apology in its place (its own outbox id, so it is
        not found as the placeholder; the answer follows it after the restart)."""
        if not self.pending.owed:  # no answer will follow: promise none
            await self.drop()
            return
        key, message_id = self.msg.key, self.msg.message_id
        apology = Post(key, reply_id(key, message_id, APOLOGY), SHUTDOWN_APOLOGY,
                       reply_to(self.msg))
        if self.id:
            await self.calls.edit(apology, self.id)
            await self.pending.job.placed("")
        elif not self.pending.late:  # a late answer's mention was told sorry the first time
            await self.calls.post(apology)


class ReplyFlow:
    """Delivers pending replies through one platform's outlet (see the module docstring)."""

    def __init__(self, outlet: ReplyOutlet, outbox: Outbox | None = None) -> None:
        self.outlet = outlet
        self.outbox = outbox or Outbox(None)
        self._told: OrderedDict[tuple[ChannelKey, str], None] = OrderedDict()

    def through(self, outlet: ReplyOutlet) -> ReplyFlow:
        """This flow through another outlet (one conversation's own, e.g. a Slack assistant
        thread's status), sharing the outbox and the notices told."""
        flow = ReplyFlow(outlet, self.outbox)
        flow._told = self._told
        return flow

    async def deliver(self, pending: PendingReply) -> bool:
        """Show, compose, deliver and settle the reply; whether it was delivered (or there
        was nothing to send). Cancelled (shutdown), it apologizes and re-raises."""
        msg, shown, sending, ok = pending.msg, _Shown(self.outlet, pending), False, False
        settled = False  # the debt settled in the record of the answer's last message
        intent = self._intend(pending)  # the answer's first message: recorded meanwhile
        try:
            await shown.start()
            # a late answer is made in the background: nobody is waiting to see it typed
            working = contextlib.nullcontext() if pending.late else self.outlet.working(msg.key)
            async with working:
                try:
                    reply = await pending.job.make(shown.sink())
                except Exception as e:  # a sentence for the person, the stack for the log
                    log.exception("reply to %s in %s failed", msg.message_id, msg.key)
                    reply = Reply(user_text(e), failed=True)
            if reply is None or not self._first_telling(pending):
                await shown.drop()  # a notice told already, or answered elsewhere
                ok = True
                return ok
            # the first intent's write, awaited before anything is sent: cut short here,
            # nothing is out, so the debt is released and the placeholder apologizes
            ahead = None if intent is None or reply.private or reply.failed else await intent
            if ahead is not None and not shown.id:  # to be posted blind: read it again
                ahead = await self.outbox.refreshed(ahead)
            sending = True
            if reply.private:  # e.g. the quota notice: only the author sees it
                await shown.drop()
                await self.outlet.whisper(msg, reply.text)
                ok = True
            else:
                sent = await self.outbox.send_all(
                    self.outlet, self._posts(msg, reply), into=shown.id,
                    settle=msg.message_id, intent=ahead)
                ok, settled = sent.delivered, sent.settled
            return ok
        except asyncio.CancelledError:  # shutdown's grace ran out: never leave "thinking…"
            ok = sending  # (part of) the answer is out: count it as answered
            if not sending:
                with contextlib.suppress(Exception):
                    await asyncio.shield(shown.apologize())
            raise
        except Exception:
            log.exception("replying to %s in %s failed", msg.message_id, msg.key)
            return False
        finally:
            if intent is not None and not intent.done():
                intent.cancel()  # nothing is posted after all (the write may still land)
            await asyncio.shield(pending.job.settled(ok, recorded=settled))

    def _intend(self, pending: PendingReply) -> asyncio.Task[Intent] | None:
        """The intent to post the answer's first message, recorded while the answer is made
        (off the reply's path; recorded early, it only makes a retry look before posting);
        None for a notice, whose messages have ids of their own."""
        if pending.notice:
            return None
        msg = pending.msg
        first = Post(msg.key, reply_id(msg.key, msg.message_id, 0), "", reply_to(msg))
        return asyncio.get_running_loop().create_task(self.outbox.intend(first))

    def _posts(self, msg: IncomingMessage, reply: Reply) -> list[Post]:
        """The reply's messages as the outlet splits it, each with its outbox id; the
        first goes into the placeholder, the last settles the debt (``Outbox.send_all``)."""
        chunks, attachment = self.outlet.split(reply.text)
        key, last = msg.key, len(chunks) - 1
        return [Post(key, reply_id(key, msg.message_id, i, notice=reply.failed), chunk,
                     reply_to(msg), first=i == 0, attachment=attachment if i == last else "")
                for i, chunk in enumerate(chunks)]

    def _first_telling(self, pending: PendingReply) -> bool:
        """False for a "couldn't save" already told for this message (the platform delivers
        an unstored message again; its author hears about it once)."""
        if pending.outcome is not Outcome.STORE_FAILED:
            return True
        told = (pending.msg.key, pending.msg.message_id)
        if told in self._told:
            return False
        self._told[told] = None
        if len(self._told) > TOLD_LIMIT:
            self._told.popitem(last=False)
        return True
