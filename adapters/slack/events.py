"""Slack ``message`` and ``app_mention`` events: translated once, decided once, answered once.

Acknowledged means stored
    ``receive`` runs before Slack gets its 200 (HTTP mode) or its envelope ack (Socket
    Mode): it returns True only once the message's turn is committed (or the event needs
    nothing stored); the reply — the model call — runs afterwards as background work. A
    store failure returns False, the transport answers 503 or withholds the ack, and Slack
    delivers the event again; nothing acknowledged is ever only in memory.

One message, one turn, one reply
    A mention arrives twice — as ``message`` and as ``app_mention`` — and Slack re-delivers
    events it thinks were lost (``X-Slack-Retry-Num``). Both carry the same channel and
    ``ts``; the first one claims ``(team, channel, ts)`` in this process, and the others
    wait for its outcome (acknowledged when it was stored, delivered again when not) and
    post nothing. A stored turn is never stored twice: the store records by message id.
    Across processes (HTTP mode behind a load balancer) the delivery claims and the
    service's idempotent recording are the guard: a duplicate gets no reply, and a
    placeholder it posted is deleted again.

What is a conversation
    Human messages (no subtype, ``thread_broadcast``, ``file_share``, ``me_message``) in any
    channel the bot is in are recorded; the bot answers, in the message's thread, when it is
    mentioned or in a DM. Bot messages (``bot_id``) and its own are skipped; ``message_changed``
    and ``message_deleted`` become ``edited``/``deleted``; joins, leaves, topic changes and
    other subtypes are not conversation. Thread messages belong to their channel's memory.

Replying
    A placeholder ("thinking…") is posted in the thread and then updated with the answer;
    with ``STREAM_REPLIES`` it is updated with the text so far at most once a second. The
    answer is neutralised, converted to mrkdwn and split by :mod:`adapters.slack.text`;
    chunks after the first are further messages in the thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from adapters.claims import DeliveryClaims
from adapters.replies import LiveThrottle, user_text
from adapters.slack.options import SlackOptions
from adapters.slack.outlet import SlackPosts
from adapters.slack.text import (
    format_reply,
    is_conversation,
    mentioned_users,
    readable,
    to_incoming,
    with_files,
)
from adapters.slack.transport import escape
from adapters.slack.users import BotIdentity, UserDirectory
from adapters.slack.web import call
from bot.messages import IncomingMessage, Reply
from bot.outbox import APOLOGY, Outbox, Post, placeholder_id, reply_id
from bot.service import STORE_FAILED, ChatService
from bot.shutdown import SHUTDOWN_APOLOGY
from memory.errors import StoreError
from memory.models import ChannelKey, OwedReply

__all__ = ["PLACEHOLDER", "SlackEvents"]

log = logging.getLogger(__name__)

PLACEHOLDER = "_thinking…_"


MessageKey = tuple[str, str, str]  # (team, channel, ts)
Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]
NAMES_WITHIN = 1.0  # seconds the acknowledgement waits for users.info; ids after that


class _Seen:
    """Recently seen message keys, each with the outcome of storing it (bounded memory).

    ``claim`` returns None to the first claimer of a key, else the first claimer's outcome
    (a future: True once stored). A key whose storing failed is forgotten, so Slack's next
    delivery of it is handled afresh.
    """

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._seen: OrderedDict[MessageKey, asyncio.Future[bool]] = OrderedDict()

    def claim(self, key: MessageKey) -> asyncio.Future[bool] | None:
        if (known := self._seen.get(key)) is not None:
            return known
        self._seen[key] = asyncio.get_running_loop().create_future()
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)
        return None

    def settle(self, key: MessageKey, stored: bool) -> None:
        fut = self._seen.get(key)
        if fut is not None and not fut.done():
            fut.set_result(stored)
        if not stored:
            self._seen.pop(key, None)


class SlackEvents:
    """Hands Slack message events to the ``ChatService`` and posts its answers."""

    def __init__(
        self,
        service: ChatService,
        options: SlackOptions,
        claims: DeliveryClaims,
        client: AsyncWebClient,
        users: UserDirectory,
        identify: Callable[[], Awaitable[BotIdentity]],
    ) -> None:
        self.service, self.options, self.claims = service, options, claims
        self.client, self.users, self.identify = client, users, identify
        self._seen = _Seen()
        self.posts = SlackPosts(client)
        self.outbox = service.outbox or Outbox(None)  # every answer goes through it
        self._told_unsaved: OrderedDict[MessageKey, None] = OrderedDict()

    async def receive(self, body: Mapping[str, Any], spawn: Spawn) -> bool:
        """A ``message`` or ``app_mention`` event callback, before its acknowledgement.

        True when the event may be acknowledged: its turn is committed, or it needs none.
        False when it was not stored (logged; the store reports its own faults): Slack must
        deliver it again. A reply is started with ``spawn`` and is not waited for.
        """
        try:
            return await self._event(body, spawn)
        except StoreError as e:
            log.debug("Slack event %s not stored: %s", escape(body.get("event_id")), e)
        except Exception:
            log.exception("handling Slack event %s failed", escape(body.get("event_id")))
        return False

    async def _event(self, body: Mapping[str, Any], spawn: Spawn) -> bool:
        event: Mapping[str, Any] = body.get("event") or {}
        team = str(body.get("team_id") or event.get("team") or "")
        me = await self.identify()
        subtype = event.get("subtype")
        if subtype == "message_changed":
            await self._edited(team, event, me)
            return True
        if subtype == "message_deleted":
            if event.get("deleted_ts"):
                key = ChannelKey("slack", team, str(event["channel"]))
                await self.service.deleted(key, str(event["deleted_ts"]))
            return True
        if not is_conversation(event, me.user_id):
            return True
        seen = (team, str(event["channel"]), str(event["ts"]))
        if (first := self._seen.claim(seen)) is not None:
            # the app_mention twin of a message event, or a retry: as the first one went
            return await asyncio.shield(first)
        stored = False
        try:
            stored = await self._store(team, event, me, seen, spawn)
        finally:
            self._seen.settle(seen, stored)
        return stored

    async def _store(
        self, team: str, event: Mapping[str, Any], me: BotIdentity, seen: MessageKey, spawn: Spawn
    ) -> bool:
        """Record the message (and start its reply); True once the turn is committed."""
        ids = [str(event["user"]), *mentioned_users(str(event.get("text") or ""))]
        lookup = asyncio.ensure_future(self.users.names(i for i in ids if i != me.user_id))
        try:  # the acknowledgement must not wait long for Slack's users.info
            names = await asyncio.wait_for(asyncio.shield(lookup), NAMES_WITHIN)
        except TimeoutError:
            names = {}
        names[me.user_id] = me.name
        msg = to_incoming(team, event, bot_user_id=me.user_id, names=names)
        if msg is None:
            return True
        recorded = asyncio.get_running_loop().create_future()

        def durable() -> None:
            if not recorded.done():
                recorded.set_result(True)

        if await self.service.will_reply(msg):  # the channel's reply_mode
            thread_ts = str(event.get("thread_ts") or event["ts"])
            work = self._answer(msg, str(event["channel"]), thread_ts, durable, seen)
        else:
            work = self._remember(msg, durable)
        task = spawn(work)
        await asyncio.wait({recorded, task}, return_when=asyncio.FIRST_COMPLETED)
        return recorded.done()

    async def _remember(self, msg: IncomingMessage, durable: Callable[[], None]) -> None:
        try:
            await self.service.on_message(msg, on_recorded=durable)
        except Exception:  # not acknowledged (durable never called): Slack delivers again
            log.exception("recording %s in %s failed", escape(msg.message_id), escape(msg.key))

    async def _edited(self, team: str, event: Mapping[str, Any], me: BotIdentity) -> None:
        new: Mapping[str, Any] = event.get("message") or {}
        old: Mapping[str, Any] = event.get("previous_message") or {}
        if new.get("bot_id") or new.get("user") in (None, me.user_id) or not new.get("ts"):
            return
        if new.get("text") == old.get("text"):
            return  # an unfurl or a reply count changed, not the words
        raw = str(new.get("text") or "")
        names = await self.users.names(i for i in mentioned_users(raw) if i != me.user_id)
        names[me.user_id] = me.name
        key = ChannelKey("slack", team, str(event["channel"]))
        await self.service.edited(key, str(new["ts"]), with_files(readable(raw, names), new))

    async def _answer(
        self,
        msg: IncomingMessage,
        channel: str,
        thread_ts: str,
        durable: Callable[[], None],
        seen: MessageKey,
    ) -> None:
        # The placeholder is posted meanwhile, not awaited first: the message must be recorded
        # before any later message of the channel (which skips this round trip).
        msg = replace(msg, route=thread_ts)  # where a late answer goes (bot.owed)
        stored: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def recorded() -> None:
            if not stored.done():
                stored.set_result(True)
            durable()

        posting = asyncio.create_task(self._claim_and_post(msg, channel, thread_ts))
        remembering = asyncio.create_task(self._remember_placeholder(msg, posting, stored))
        sending: list[bool] = []  # set once the answer is being posted
        try:
            await self._answer_with(msg, channel, thread_ts, posting, sending, recorded, seen)
        except asyncio.CancelledError:  # shutdown's grace ran out: never leave "thinking…"
            if not stored.done():
                stored.set_result(False)
            await asyncio.shield(remembering)  # before an apology takes the placeholder's role
            if sending:  # (part of) the answer is out: count it as answered
                await asyncio.shield(self.service.delivered(msg, True))
            else:
                await asyncio.shield(self._cut_short(msg, channel, posting))
            raise
        finally:
            if not stored.done():  # not recorded: no debt to remember the placeholder on
                stored.set_result(False)
            await asyncio.shield(remembering)

    async def _remember_placeholder(self, msg: IncomingMessage, posting: asyncio.Task[str | None],
                                    stored: asyncio.Future[bool]) -> None:
        """Remember the placeholder on the debt once both exist, so a late answer (after a
        crash) goes into it instead of beside it (``bot.outbox``)."""
        owed = self.service.owed
        try:
            placeholder = await asyncio.shield(posting)
        except Exception:  # the reply path reports a failed post
            return
        if placeholder is not None and owed is not None and await stored:
            await owed.showing(msg.key, msg.message_id, placeholder)

    async def _cut_short(self, msg: IncomingMessage, channel: str,
                         posting: asyncio.Task[str | None]) -> None:
        """Replace the placeholder with an apology; the debt is released, so the message is
        answered after the restart (or by another replica)."""
        try:
            placeholder = await posting
            if placeholder is not None:  # the apology's own id: not found as the placeholder
                apology = Post(msg.key, reply_id(msg.key, msg.message_id, APOLOGY),
                               SHUTDOWN_APOLOGY, msg.route)
                await self.posts.edit(apology, placeholder)
                if self.service.owed is not None:  # the apology stays; the answer follows it
                    await self.service.owed.showing(msg.key, msg.message_id, "")
        finally:
            await self.service.delivered(msg, False)

    async def _answer_with(self, msg: IncomingMessage, channel: str, thread_ts: str,
                           posting: asyncio.Task[str | None], sending: list[bool],
                           durable: Callable[[], None], seen: MessageKey) -> None:
        sink: Callable[[str], Awaitable[None]] | None = None
        if self.options.stream_replies:
            throttle = LiveThrottle(self.options.stream_interval, shown_now=True)

            async def show(text: str) -> None:
                if throttle.due() and (ts := await posting) is not None:
                    preview = format_reply(text, self.users.known())[0]
                    await self._update(channel, ts, f"{preview} …")

            sink = show
        reply: Reply | None
        try:
            reply = await self.service.on_message(msg, on_delta=sink, on_recorded=durable)
        except Exception as e:
            log.exception("reply to %s in %s failed", escape(msg.message_id), escape(msg.key))
            reply = Reply(user_text(e), failed=True)
        placeholder = await posting
        if reply is not None and reply.text == STORE_FAILED and not self._first_telling(seen):
            reply = None  # told once already; Slack's deliveries of it are retried silently
        if reply is None:  # another process answered this message already
            if placeholder is not None:
                await call(
                    f"chat.delete in {channel}",
                    self.client.chat_delete(channel=channel, ts=placeholder),
                )
            return
        sending.append(True)
        if reply.private:  # e.g. the quota notice: only the author sees it
            if placeholder is not None:
                await call(f"chat.delete in {channel}",
                           self.client.chat_delete(channel=channel, ts=placeholder))
            await call(f"chat.postEphemeral in {channel}", self.client.chat_postEphemeral(
                channel=channel, user=msg.author_id, text=reply.text, thread_ts=thread_ts))
            await self.service.delivered(msg, True)
            return
        ok = await self.send_reply(msg.key, msg.message_id, thread_ts, reply, placeholder)
        await self.service.delivered(msg, ok)

    async def send_reply(self, key: ChannelKey, message_id: str, thread_ts: str, reply: Reply,
                         placeholder: str | None = None) -> bool:
        """Post the reply to ``message_id`` in the thread, through the outbox (into
        ``placeholder`` when there is one; its debt settled with the last message); whether
        all of it was delivered."""
        chunks = format_reply(reply.text, self.users.known())
        posts = [Post(key, reply_id(key, message_id, i, notice=reply.failed), chunk, thread_ts)
                 for i, chunk in enumerate(chunks)]
        return await self.outbox.send_all(self.posts, posts, into=placeholder or "",
                                          settle=message_id)

    async def deliver_owed(self, owed: OwedReply, reply: Reply) -> bool:
        """Deliver the late answer to a mention a crash left unanswered (``bot.owed``),
        replacing the placeholder the first attempt showed (found by its outbox id when
        the crash came before it was remembered)."""
        thread_ts = owed.route or owed.message_id
        placeholder = owed.placeholder or await self.posts.find(
            Post(owed.key, placeholder_id(owed.key, owed.message_id), PLACEHOLDER, thread_ts))
        return await self.send_reply(owed.key, owed.message_id, thread_ts, reply, placeholder)

    def _first_telling(self, seen: MessageKey) -> bool:
        """True the first time a message's "couldn't save" is to be told (bounded memory)."""
        if seen in self._told_unsaved:
            return False
        self._told_unsaved[seen] = None
        if len(self._told_unsaved) > 1000:
            self._told_unsaved.popitem(last=False)
        return True

    async def _claim_and_post(
        self, msg: IncomingMessage, channel: str, thread_ts: str
    ) -> str | None:
        """Claim the delivery in the database, then post the placeholder.

        Replicas behind a load balancer may each get one Slack delivery (a retry lands
        elsewhere): only the claim's winner shows "thinking…"; the service's idempotent
        record makes sure only one of them answers either way.
        """
        event_id = f"slack:{msg.key.workspace}:{channel}:{msg.message_id}"
        try:
            if not await self.claims.claim_event(event_id):
                return None
        except Exception:
            log.warning("could not claim %s; answering anyway", escape(event_id), exc_info=True)
        # It carries an outbox id too: a crash before it is remembered on the debt leaves
        # it findable, so the late answer still replaces it (``deliver_owed``).
        return await self.posts.post(Post(msg.key, placeholder_id(msg.key, msg.message_id),
                                          PLACEHOLDER, thread_ts))

    async def _update(self, channel: str, ts: str, text: str) -> bool:
        r = await call(
            f"chat.update in {channel}", self.client.chat_update(channel=channel, ts=ts, text=text)
        )
        return r is not None

