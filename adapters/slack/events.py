"""Slack ``message`` and ``app_mention`` events: translated once, handed over once.

- **Acknowledged means stored**: ``receive`` runs before Slack gets its 200 (HTTP) or its
  envelope ack (Socket Mode) and says stored only once the turn is committed; the reply
  runs afterwards. A store failure withholds the ack (503), and Slack delivers again.
- **One message, one turn, one reply**: a mention arrives as ``message`` and as
  ``app_mention``, and Slack re-delivers what it thinks was lost; the store records by
  message id, so duplicates are told they were delivered before and get no reply.
- **What is conversation**: human messages (no subtype, ``thread_broadcast``,
  ``file_share``, ``me_message``) are recorded; the bot answers in the thread when
  mentioned or in a DM. Bot messages are skipped; ``message_changed``/``message_deleted``
  become edits/deletes; joins and topic changes are not conversation.
- **A thread is the reply chain**: a message in a thread gets the thread's earlier
  messages into its prompt (``adapters.slack.threads``).
- **Replying**: ``bot.conversation.reply_flow`` through ``SlackReplies`` (a "thinking…" placeholder
  in the thread, updated with the answer; further chunks as further thread messages). An
  assistant thread (:mod:`adapters.slack.assistant`) hands over its own way of delivering
  and the channel its person is viewing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.outlet import PLACEHOLDER, SlackReplies
from adapters.slack.text import (
    is_conversation,
    mentioned_users,
    readable,
    to_incoming,
    with_files,
)
from adapters.slack.threads import thread_chain
from adapters.slack.transport import escape
from adapters.slack.users import BotIdentity, UserDirectory
from bot.platform import (
    ChannelKey,
    Features,
    PendingReply,
    ReplyFlow,
    Settings,
    StoreError,
    Viewing,
)

__all__ = ["PLACEHOLDER", "Deliver", "SlackEvents", "Spawn"]

log = logging.getLogger(__name__)


MessageKey = tuple[str, str, str]  # (team, channel, ts)
Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]
Deliver = Callable[[PendingReply], Coroutine[Any, Any, Any]]  # a reply's way out
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
        features: Features,
        settings: Settings,
        client: AsyncWebClient,
        users: UserDirectory,
        identify: Callable[[], Awaitable[BotIdentity]],
    ) -> None:
        self.service, self.features = features.service, features
        self.users, self.identify = users, identify
        self.client = client
        self._seen = _Seen()
        self.flow = ReplyFlow(SlackReplies(client, settings.chat, users), features.outbox)

    async def receive(self, body: Mapping[str, Any], spawn: Spawn, *,
                      viewing: Viewing | None = None, deliver: Deliver | None = None) -> bool:
        """A ``message`` or ``app_mention`` event callback, before its acknowledgement.

        True when the event may be acknowledged: its turn is committed, or it needs none.
        False when it was not stored (logged; the store reports its own faults): Slack must
        deliver it again. A reply is started with ``spawn`` (through ``deliver``, else the
        reply flow) and is not waited for; ``viewing``: the channel the author is viewing.
        """
        try:
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
                stored = await self._store(team, event, me, spawn, viewing,
                                           deliver or self.flow.deliver)
            finally:
                self._seen.settle(seen, stored)
            return stored
        except StoreError as e:
            log.debug("Slack event %s not stored: %s", escape(body.get("event_id")), e)
        except Exception:
            log.exception("handling Slack event %s failed", escape(body.get("event_id")))
        return False

    async def _store(self, team: str, event: Mapping[str, Any], me: BotIdentity,
                     spawn: Spawn, viewing: Viewing | None, deliver: Deliver) -> bool:
        """Hand the message to the service (and start its reply); True once stored."""
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
        # a reply goes in the message's thread, a late one too (bot.missed.owed keeps the route)
        msg = replace(msg, route=str(event.get("thread_ts") or event["ts"]), viewing=viewing,
                      chain=thread_chain(self.client, me, event))  # the thread, when read
        received = await self.service.receive(msg)
        if received.reply is not None:  # the model call runs after the acknowledgement
            spawn(deliver(received.reply))
        return received.stored

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
