"""Slack's assistant threads (the AI-app split view), through bolt's ``Assistant`` middleware.

- **A thread starts** (``assistant_thread_started``): a short greeting and suggested prompts
  saying what gistbot does — catch up on the channel being viewed, summarize it, ask its
  memory. The greeting carries the thread's context (the channel the person is viewing) in
  its metadata, where bolt's convention keeps it, so another replica or a restart finds it.
- **The person views another channel** (``assistant_thread_context_changed``): bolt saves
  the new context through ``ThreadContexts`` (in this process, and on the greeting).
- **A message in the thread**: the same path as any message (``SlackEvents.receive``:
  stored before the acknowledgement, once), plus the channel in view as
  ``IncomingMessage.viewing`` — readable only when the read check says the author may read
  it (``conversations.members``) — and a reply through ``AssistantReplies``: the thread's
  "is thinking…" status instead of a placeholder, so nothing is left behind. The first
  question becomes the thread's title.

Status and title are decoration: when Slack refuses them the reply is posted all the same.
The thread's own memory is the direct-message conversation's (its channel key), like any
DM; the viewed channel's memory is read for the reply and never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from slack_bolt import BoltResponse
from slack_bolt.context.assistant.thread_context import AssistantThreadContext
from slack_bolt.context.assistant.thread_context_store.async_store import (
    AsyncAssistantThreadContextStore,
)
from slack_bolt.context.get_thread_context.async_get_thread_context import (
    AsyncGetThreadContext,
)
from slack_bolt.context.set_suggested_prompts.async_set_suggested_prompts import (
    AsyncSetSuggestedPrompts,
)
from slack_bolt.middleware.assistant.async_assistant import AsyncAssistant
from slack_bolt.request.payload_utils import is_other_message_sub_event_in_assistant_thread
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.access import SlackMember
from adapters.slack.events import SlackEvents, Spawn
from adapters.slack.outlet import SlackReplies
from adapters.slack.users import BotIdentity, UserDirectory
from adapters.slack.web import call
from bot.platform import ChannelKey, ChatSettings, PendingReply, Post, Verdict, Viewing, refusal

__all__ = [
    "CONTEXT_EVENT",
    "GREETING",
    "PROMPTS",
    "STATUS",
    "AssistantReplies",
    "SlackAssistant",
    "ThreadContexts",
    "decorate",
]

log = logging.getLogger(__name__)
Json = dict[str, Any]
Thread = tuple[str, str]  # (DM channel, thread ts)

CONTEXT_EVENT = "assistant_thread_context"  # bolt's metadata event type for a thread's context
STATUS = "is thinking…"
GREETING = ("Hi! I remember the conversations in the channels I'm in. Ask me about the "
            "channel you're viewing, or about anything we talked about.")
PROMPTS_TITLE = "Try one of these:"
PROMPTS: tuple[Json, ...] = (
    {"title": "Catch me up", "message": "Catch me up on the channel I'm viewing."},
    {"title": "Summarize this channel",
     "message": "Summarize what the channel I'm viewing has talked about."},
    {"title": "Ask my memory", "message": "What do you remember about our decisions so far?"},
)
TITLE_CHARS = 60  # Slack shows a short title; the question is cut to this
CONTEXT_WITHIN = 1.0  # seconds the acknowledgement waits for the context and read check
STATUS_WITHIN = 2.0  # seconds the answer waits for its "thinking" status to be set
KEEP = 10_000  # threads remembered in this process (contexts, titles, greetings)


async def decorate(what: str, request: Awaitable[Any]) -> None:
    """Set a thread's status, title or prompts; a refusal (a DM thread that is no assistant
    thread, a plan without AI apps) is logged in one line, never raised."""
    try:
        await request
    except SlackApiError as e:
        log.info("Slack refused %s: %s", what, e.response.get("error"))
    except Exception:
        log.warning("Slack %s failed", what, exc_info=True)


class _Bounded(OrderedDict[Thread, Any]):
    """The newest ``KEEP`` threads' values."""

    def keep(self, thread: Thread, value: Any) -> None:
        self[thread] = value
        self.move_to_end(thread)
        if len(self) > KEEP:
            self.popitem(last=False)


class ThreadContexts(AsyncAssistantThreadContextStore):
    """Where each assistant thread's context (the channel in view) is kept: in this process,
    and in the metadata of the thread's greeting, read back when this process does not know
    the thread. Only a greeting carrying bolt's context event type is changed, never a reply
    (whose metadata is its outbox id)."""

    def __init__(self, client: AsyncWebClient,
                 identify: Callable[[], Awaitable[BotIdentity]]) -> None:
        self.client, self.identify = client, identify
        self._known = _Bounded()

    def remember(self, channel_id: str, thread_ts: str, context: Mapping[str, Any]) -> None:
        """Keep ``context`` for the thread in this process."""
        self._known.keep((channel_id, thread_ts), dict(context))

    async def save(self, *, channel_id: str, thread_ts: str, context: dict[str, str]) -> None:
        self.remember(channel_id, thread_ts, context)
        greeting = await self._greeting(channel_id, thread_ts)
        if greeting is not None:
            await call(f"chat.update of the greeting in {channel_id}", self.client.chat_update(
                channel=channel_id, ts=greeting["ts"], text=greeting.get("text") or GREETING,
                metadata={"event_type": CONTEXT_EVENT, "event_payload": context}))

    async def find(self, *, channel_id: str, thread_ts: str) -> AssistantThreadContext | None:
        known = self._known.get((channel_id, thread_ts))
        if known is None:
            greeting = await self._greeting(channel_id, thread_ts)
            payload = ((greeting or {}).get("metadata") or {}).get("event_payload") or {}
            if not payload.get("channel_id"):
                return None
            known = dict(payload)
            self.remember(channel_id, thread_ts, known)
        return AssistantThreadContext(known) if known.get("channel_id") else None

    async def _greeting(self, channel_id: str, thread_ts: str) -> Json | None:
        """The bot's greeting in the thread (the first messages are read), if any."""
        me = await self.identify()
        try:
            r = await self.client.conversations_replies(
                channel=channel_id, ts=thread_ts, include_all_metadata=True, limit=4)
        except SlackApiError as e:  # e.g. thread_not_found: a DM thread with no greeting
            log.debug("no greeting in %s: %s", thread_ts, e.response.get("error"))
            return None
        except Exception:
            log.warning("reading the greeting in %s failed", channel_id, exc_info=True)
            return None
        for m in r.get("messages") or []:
            meta = m.get("metadata") or {}
            if m.get("user") == me.user_id and meta.get("event_type") == CONTEXT_EVENT:
                return dict(m)
        return None


class AssistantReplies(SlackReplies):
    """``ReplyOutlet`` for one assistant thread: no placeholder (Slack shows the thread's
    status while the answer is made, and clears it when the answer is posted)."""

    placeholder = ""

    def __init__(self, client: AsyncWebClient, chat: ChatSettings, users: UserDirectory,
                 thread: Thread) -> None:
        super().__init__(client, chat, users)
        self.channel, self.thread_ts = thread
        self.posted = False

    async def post(self, post: Post) -> str | None:
        ts = await super().post(post)
        self.posted = self.posted or ts is not None
        return ts

    async def status(self, text: str) -> None:
        """Set the thread's status ("": clear it); a refusal is logged, never raised."""
        await decorate(f"assistant.threads.setStatus in {self.channel}",
                       self.client.assistant_threads_setStatus(
                           channel_id=self.channel, thread_ts=self.thread_ts, status=text))

    @contextlib.asynccontextmanager
    async def working(self, key: ChannelKey) -> AsyncIterator[None]:
        try:  # a slow Slack delays the answer by STATUS_WITHIN at most
            await asyncio.wait_for(self.status(STATUS), STATUS_WITHIN)
        except TimeoutError:
            log.info("assistant.threads.setStatus in %s took too long; answering", self.channel)
        yield


class SlackAssistant:
    """bolt's ``AsyncAssistant`` wired to gistbot: prompts on a new thread, answers in it."""

    def __init__(self, events: SlackEvents, client: AsyncWebClient, chat: ChatSettings,
                 users: UserDirectory, identify: Callable[[], Awaitable[BotIdentity]],
                 spawn: Spawn) -> None:
        self.events, self.client, self.chat, self.users = events, client, chat, users
        self.identify, self.spawn = identify, spawn
        self.contexts = ThreadContexts(client, identify)
        self._greeted = _Bounded()
        self._titled = _Bounded()
        self.middleware = AsyncAssistant(thread_context_store=self.contexts)
        self.middleware.thread_started(self.started)
        self.middleware.user_message(self.asked)
        # assistant_thread_context_changed: bolt's default saves it through self.contexts

    async def changes(self, body: Json, next: Callable[[], Awaitable[Any]]) -> BoltResponse | None:
        """Global middleware: an edit or deletion in a direct-message thread goes to
        ``SlackEvents`` like anywhere else (bolt's ``Assistant`` would acknowledge it unseen)."""
        if not is_other_message_sub_event_in_assistant_thread(body):
            await next()
            return None
        if await self.events.receive(body, self.spawn):
            return BoltResponse(status=200, body="")
        return BoltResponse(status=503, body="not stored; deliver again")

    async def started(self, body: Json, payload: Json,
                      set_suggested_prompts: AsyncSetSuggestedPrompts) -> None:
        """``assistant_thread_started``: the greeting (carrying the context) and prompts."""
        thread: Json = payload.get("assistant_thread") or {}
        channel, thread_ts = str(thread.get("channel_id") or ""), str(thread.get("thread_ts") or "")
        context: Json = thread.get("context") or {}
        self.contexts.remember(channel, thread_ts, context)
        team = str(body.get("team_id") or context.get("team_id") or "")
        key, user = ChannelKey("slack", team, channel), str(thread.get("user_id") or "")
        features = self.events.features  # the access lists, with this DM's server's own
        lists = (await features.channels.get(key)).access
        if features.access.verdict(key, user, None, direct=True,
                                   server=lists) is not Verdict.ADMITTED:
            return  # kept out: nothing is shown
        await decorate(f"assistant.threads.setSuggestedPrompts in {channel}",
                       set_suggested_prompts(list(PROMPTS), title=PROMPTS_TITLE))
        if (channel, thread_ts) in self._greeted:  # Slack delivered the event again
            return
        self._greeted.keep((channel, thread_ts), True)
        await call(f"the greeting in {channel}", self.client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, text=GREETING,
            metadata={"event_type": CONTEXT_EVENT, "event_payload": context}))

    async def asked(self, body: Json, payload: Json,
                    get_thread_context: AsyncGetThreadContext) -> BoltResponse | None:
        """A person's message in an assistant thread: stored before the acknowledgement,
        answered in the thread with the channel in view (when they may read it)."""
        team = str(body.get("team_id") or payload.get("team") or "")
        thread = (str(payload.get("channel") or ""), str(payload.get("thread_ts") or ""))
        try:
            viewing = await asyncio.wait_for(
                self._viewing(team, str(payload.get("user") or ""), get_thread_context),
                CONTEXT_WITHIN)
        except TimeoutError:
            log.info("no context for assistant thread %s in time; answering without it",
                     thread[1])
            viewing = None
        outlet = AssistantReplies(self.client, self.chat, self.users, thread)
        flow = self.events.flow.through(outlet)

        async def deliver(pending: PendingReply) -> None:
            if thread not in self._titled:  # the first question answered names the thread
                self._titled.keep(thread, True)
                self.spawn(self._title(thread, pending.msg.text))
            await flow.deliver(pending)
            if not outlet.posted:  # an ephemeral notice, or nothing to say: only a post
                await outlet.status("")  # in the thread clears the status by itself

        stored = await self.events.receive(body, self.spawn, viewing=viewing, deliver=deliver)
        if not stored:
            return BoltResponse(status=503, body="not stored; deliver again")
        return None

    async def _viewing(self, team: str, user: str,
                       get_thread_context: AsyncGetThreadContext) -> Viewing | None:
        """The channel the person views, and whether the read check lets them read it."""
        try:
            context = await get_thread_context()
        except Exception:
            log.warning("could not read an assistant thread's context", exc_info=True)
            return None
        if context is None or not context.channel_id:
            return None
        key = ChannelKey("slack", str(context.team_id or team), str(context.channel_id))
        member = SlackMember(self.client, user)
        return Viewing(key, await refusal(key, member, member, public=False) is None)

    async def _title(self, thread: Thread, text: str) -> None:
        """The thread's title: its first question, cut short."""
        title = " ".join(text.split())
        if len(title) > TITLE_CHARS:
            title = title[:TITLE_CHARS - 1].rstrip() + "…"
        if title:
            await decorate(f"assistant.threads.setTitle in {thread[0]}",
                           self.client.assistant_threads_setTitle(
                               channel_id=thread[0], thread_ts=thread[1], title=title))
