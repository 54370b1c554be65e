"""The Slack adapter: slack-bolt ``AsyncApp`` events and slash commands → ``ChatService``.

Transport
    Socket Mode when ``SLACK_APP_TOKEN`` is set (an outbound websocket; no public URL),
    otherwise HTTP mode: an aiohttp server on ``HOST:PORT`` answering ``POST /slack/events``,
    where bolt verifies every request's signature with ``SLACK_SIGNING_SECRET`` (bad or
    older than five minutes: 401).

Acknowledge first, work after
    Every event and command is acknowledged at once (bolt acks events before the listener
    runs; commands call ``ack()`` first) and the work runs in a task this adapter tracks,
    so Slack's three seconds are never at risk and shutdown can wait for replies in flight.

One message, one turn, one reply
    A mention arrives twice — as ``message`` and as ``app_mention`` — and Slack re-delivers
    events it thinks were lost (``X-Slack-Retry-Num``). Both carry the same channel and
    ``ts``; the first one claims ``(team, channel, ts)`` in this process and the others are
    dropped before anything is posted. Across processes (HTTP mode behind a load balancer)
    the service's idempotent recording is the guard: a duplicate gets no reply, and the
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
    answer is neutralised, converted to mrkdwn and split by :mod:`adapters.slack_text`;
    chunks after the first are further messages in the thread. 429 answers from the Web API
    are retried after ``Retry-After`` by slack_sdk's retry handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from adapters.claims import DeliveryClaims
from adapters.slack_text import (
    format_reply,
    is_conversation,
    mentioned_users,
    readable,
    to_incoming,
    with_files,
)
from bot.app import Runtime
from bot.errors import ConfigError, GistbotError
from bot.messages import IncomingMessage, Reply
from bot.settings import Settings
from memory.models import ChannelKey

__all__ = [
    "EVENTS_PATH",
    "PLACEHOLDER",
    "BotIdentity",
    "SlackAdapter",
    "UserDirectory",
    "build_app",
    "connect_socket_mode",
    "http_app",
    "make_web_client",
    "run_slack",
    "serve_http",
]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
PLACEHOLDER = "_thinking…_"
RESPONSE_URL_LIMIT = 5  # Slack accepts at most five posts to one response_url
_FRIENDLY = GistbotError.user_message
Json = dict[str, Any]


def make_web_client(settings: Settings, *, base_url: str | None = None) -> AsyncWebClient:
    """The bot's Web API client: retries connection errors, 5xx once, and 429 after
    ``Retry-After`` (up to three times)."""
    if settings.slack_bot_token is None:
        raise ConfigError("SLACK_BOT_TOKEN is not set; copy the Bot User OAuth Token (xoxb-…)")
    return AsyncWebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=base_url or AsyncWebClient.BASE_URL,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncServerErrorRetryHandler(max_retry_count=1),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ],
    )


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is in this workspace, from ``auth.test``."""

    user_id: str
    bot_id: str
    name: str
    team_id: str


def _display_name(user: Mapping[str, Any]) -> str | None:
    profile = user.get("profile") or {}
    for name in (
        profile.get("display_name"),
        profile.get("real_name"),
        user.get("real_name"),
        user.get("name"),
    ):
        if isinstance(name, str) and name.strip():
            return name.strip()
    return None


class UserDirectory:
    """``users.info`` with a cache: names for ids, and admin flags for ``/reset``.

    Entries live ``ttl`` seconds; a failed look-up is remembered for ``negative_ttl`` so a
    broken token or a deleted user does not cost one API call per message.
    """

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        ttl: float = 3600.0,
        negative_ttl: float = 60.0,
        max_entries: int = 5000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl, self.negative_ttl, self.max_entries = ttl, negative_ttl, max_entries
        self.clock = clock
        self._cache: OrderedDict[str, tuple[float, Json | None]] = OrderedDict()

    async def info(self, user_id: str, *, fresh: bool = False) -> Json | None:
        """The ``user`` object, or None when Slack would not say."""
        hit = self._cache.get(user_id)
        if hit is not None and not fresh and hit[0] > self.clock():
            return hit[1]
        user: Json | None = None
        try:
            response = await self.client.users_info(user=user_id)
            found = response.get("user")
            user = found if isinstance(found, dict) else None
        except Exception:
            log.warning("users.info for %s failed", user_id, exc_info=True)
        self._cache[user_id] = (self.clock() + (self.ttl if user else self.negative_ttl), user)
        self._cache.move_to_end(user_id)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return user

    async def names(self, user_ids: Iterable[str]) -> dict[str, str]:
        """Display names for ``user_ids`` (the id itself when unknown)."""
        unique = list(dict.fromkeys(user_ids))
        infos = await asyncio.gather(*(self.info(uid) for uid in unique))
        pairs = zip(unique, infos, strict=True)
        return {uid: (_display_name(i) if i else None) or uid for uid, i in pairs}

    def known(self) -> dict[str, str]:
        """The names already cached (no API call), for neutralising mentions in output."""
        out: dict[str, str] = {}
        for uid, (_, user) in self._cache.items():
            name = _display_name(user) if user else None
            if name:
                out[uid] = name
        return out


class _Claims:
    """Recently seen message keys; ``claim`` is true once per key (bounded memory)."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._seen: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def claim(self, key: tuple[str, str, str]) -> bool:
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)
        return True


class _Throttle:
    """Calls ``update`` with the text so far at most once per ``interval`` seconds."""

    def __init__(self, update: Callable[[str], Awaitable[object]], interval: float) -> None:
        self.update, self.interval = update, interval
        self._last = time.monotonic()  # the placeholder was just posted

    async def __call__(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            await self.update(text)


def _user_message(error: BaseException) -> str:
    return error.user_message if isinstance(error, GistbotError) else _FRIENDLY


class SlackAdapter:
    """Translates Slack events and commands into ``ChatService`` calls and posts the results."""

    def __init__(
        self, runtime: Runtime, client: AsyncWebClient, *, stream_interval: float = 1.0
    ) -> None:
        self.runtime = runtime
        self.service = runtime.service
        self.settings = runtime.settings
        self.client = client
        self.users = UserDirectory(client)
        self.stream_interval = stream_interval
        self._identity: BotIdentity | None = None
        self._identity_lock = asyncio.Lock()
        self._claims = _Claims()
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def identify(self) -> BotIdentity:
        """``auth.test`` once; also names the bot in the service (its assistant turns)."""
        async with self._identity_lock:
            if self._identity is None:
                try:
                    r = await self.client.auth_test()
                except SlackApiError as e:
                    raise ConfigError(
                        f"Slack rejected SLACK_BOT_TOKEN ({e.response.get('error')}); copy the "
                        "Bot User OAuth Token (xoxb-…) from the app's OAuth & Permissions page"
                    ) from None
                ident = BotIdentity(
                    str(r.get("user_id") or ""),
                    str(r.get("bot_id") or ""),
                    str(r.get("user") or "gistbot"),
                    str(r.get("team_id") or ""),
                )
                self.service.set_identity("slack", ident.user_id, ident.name)
                self._identity = ident
            return self._identity

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after the acknowledgement; kept so ``drain`` can wait for it."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, within: float | None = None) -> bool:
        """Wait until no work is running (new work started meanwhile included).

        True when idle; False when ``within`` seconds passed first.
        """
        deadline = None if within is None else time.monotonic() + within
        while self._tasks:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            await asyncio.wait(set(self._tasks), timeout=left)
        return True

    async def close(self, within: float = 10.0) -> None:
        """Let replies in flight finish (up to ``within`` seconds), then cancel the rest."""
        if not await self.drain(within):
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def register(self, app: AsyncApp) -> None:
        """Attach the listeners to ``app``."""

        async def on_event(body: Json) -> None:
            self.spawn(self.handle_event(body))

        async def on_summary(ack: AsyncAck, command: Json, respond: AsyncRespond) -> None:
            await ack()
            self.spawn(self.summary_command(command, respond))

        async def on_reset(ack: AsyncAck, command: Json, respond: AsyncRespond) -> None:
            await ack()
            self.spawn(self.reset_command(command, respond))

        app.event("message")(on_event)
        app.event("app_mention")(on_event)
        async def on_remember(ack: AsyncAck, command: Json, respond: AsyncRespond) -> None:
            await ack()
            self.spawn(self.remember_command(command, respond))

        async def on_memory(ack: AsyncAck, command: Json, respond: AsyncRespond) -> None:
            await ack()
            self.spawn(self.memory_command(command, respond))

        async def on_forget(ack: AsyncAck, command: Json, respond: AsyncRespond) -> None:
            await ack()
            self.spawn(self.forget_command(command, respond))

        app.command("/summary")(on_summary)
        app.command("/reset")(on_reset)
        app.command("/remember")(on_remember)
        app.command("/memory")(on_memory)
        app.command("/forget")(on_forget)

    # ------------------------------------------------------------------ events

    async def handle_event(self, body: Mapping[str, Any]) -> None:
        """A ``message`` or ``app_mention`` event callback; errors end here, logged."""
        try:
            await self._event(body)
        except Exception:
            log.exception("handling Slack event %s failed", body.get("event_id"))

    async def _event(self, body: Mapping[str, Any]) -> None:
        event: Mapping[str, Any] = body.get("event") or {}
        team = str(body.get("team_id") or event.get("team") or "")
        me = await self.identify()
        subtype = event.get("subtype")
        if subtype == "message_changed":
            await self._edited(team, event, me)
            return
        if subtype == "message_deleted":
            if event.get("deleted_ts"):
                key = ChannelKey("slack", team, str(event["channel"]))
                await self.service.deleted(key, str(event["deleted_ts"]))
            return
        if not is_conversation(event, me.user_id):
            return
        claim = (team, str(event["channel"]), str(event["ts"]))
        if not self._claims.claim(claim):
            return  # the app_mention twin of a message event, or a retry
        ids = [str(event["user"]), *mentioned_users(str(event.get("text") or ""))]
        names = await self.users.names(i for i in ids if i != me.user_id)  # never raises
        names[me.user_id] = me.name
        msg = to_incoming(team, event, bot_user_id=me.user_id, names=names)
        if msg is None:
            return
        if not self.service.should_reply(msg):
            await self.service.on_message(msg)
            return
        await self._answer(msg, str(event["channel"]), str(event.get("thread_ts") or event["ts"]))

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

    async def _answer(self, msg: IncomingMessage, channel: str, thread_ts: str) -> None:
        # The placeholder is posted meanwhile, not awaited first: the message must be recorded
        # before any later message of the channel (which skips this round trip).
        posting = asyncio.create_task(self._claim_and_post(msg, channel, thread_ts))
        sink = None
        if self.settings.stream_replies:

            async def show(text: str) -> None:
                if (ts := await posting) is not None:
                    preview = format_reply(text, self.users.known())[0]
                    await self._update(channel, ts, f"{preview} …")

            sink = _Throttle(show, self.stream_interval)
        reply: Reply | None
        try:
            reply = await self.service.on_message(msg, on_delta=sink)
        except Exception as e:
            log.exception("reply to %s in %s failed", msg.message_id, msg.key)
            reply = Reply(_user_message(e), failed=True)
        placeholder = await posting
        if reply is None:  # another process answered this message already
            if placeholder is not None:
                await self._call(
                    f"chat.delete in {channel}",
                    self.client.chat_delete(channel=channel, ts=placeholder),
                )
            return
        chunks = format_reply(reply.text, self.users.known())
        first, rest = chunks[0], chunks[1:]
        if placeholder is None or not await self._update(channel, placeholder, first):
            await self._post(channel, thread_ts, first)
        for chunk in rest:
            await self._post(channel, thread_ts, chunk)

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
            claims = cast(DeliveryClaims, self.runtime.store)
            if not await claims.claim_event(event_id):
                return None
        except Exception:
            log.warning("could not claim %s; answering anyway", event_id, exc_info=True)
        return await self._post(channel, thread_ts, PLACEHOLDER)

    async def _call(self, what: str, call: Awaitable[Any]) -> Any | None:
        try:
            return await call
        except Exception:
            log.exception("Slack %s failed", what)
            return None

    async def _post(self, channel: str, thread_ts: str, text: str) -> str | None:
        r = await self._call(
            f"chat.postMessage in {channel}",
            self.client.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                text=text,
                unfurl_links=False,
                unfurl_media=False,
            ),
        )
        return str(r.get("ts")) if r is not None and r.get("ts") else None

    async def _update(self, channel: str, ts: str, text: str) -> bool:
        r = await self._call(
            f"chat.update in {channel}", self.client.chat_update(channel=channel, ts=ts, text=text)
        )
        return r is not None

    # ------------------------------------------------------------------ commands

    async def summary_command(self, command: Mapping[str, Any], respond: AsyncRespond) -> None:
        """``/summary`` (only the caller sees it) or ``/summary public`` (the channel does)."""
        public = str(command.get("text") or "").strip().lower() == "public"
        try:
            key = ChannelKey("slack", str(command["team_id"]), str(command["channel_id"]))
            text = (await self.service.summary(key)).text
        except Exception as e:
            log.exception("/summary failed")
            text, public = _user_message(e), False
        await self._respond(respond, text, public=public)

    async def reset_command(self, command: Mapping[str, Any], respond: AsyncRespond) -> None:
        """``/reset``: for workspace admins/owners and ``SLACK_ADMIN_USER_IDS``."""
        try:
            key = ChannelKey("slack", str(command["team_id"]), str(command["channel_id"]))
            allowed = await self.may_reset(str(command["user_id"]))
            refusal = (
                "Only workspace admins and owners (or the users in SLACK_ADMIN_USER_IDS) can "
                "reset this channel's memory."
            )
            text = (await self.service.reset(key, allowed=allowed, refusal=refusal)).text
        except Exception as e:
            log.exception("/reset failed")
            text = _user_message(e)
        await self._respond(respond, text, public=False)

    async def remember_command(self, command: Mapping[str, Any], respond: AsyncRespond) -> None:
        """``/remember <text>``: anyone may pin a fact; the confirmation is ephemeral."""
        try:
            key = ChannelKey("slack", str(command["team_id"]), str(command["channel_id"]))
            user = str(command.get("user_id") or "")
            author = (await self.users.names([user]))[user] if user else ""
            text = readable(str(command.get("text") or ""), self.users.known())
            text = (await self.service.remember(key, text, author=author)).text
        except Exception as e:
            log.exception("/remember failed")
            text = _user_message(e)
        await self._respond(respond, text, public=False)

    async def memory_command(self, command: Mapping[str, Any], respond: AsyncRespond) -> None:
        """``/memory``: the channel's facts, to the caller only."""
        try:
            key = ChannelKey("slack", str(command["team_id"]), str(command["channel_id"]))
            text = (await self.service.memory_list(key)).text
        except Exception as e:
            log.exception("/memory failed")
            text = _user_message(e)
        await self._respond(respond, text, public=False)

    async def forget_command(self, command: Mapping[str, Any], respond: AsyncRespond) -> None:
        """``/forget <id or text>``: the same people as ``/reset``."""
        try:
            key = ChannelKey("slack", str(command["team_id"]), str(command["channel_id"]))
            allowed = await self.may_reset(str(command["user_id"]))
            refusal = (
                "Only workspace admins and owners (or the users in SLACK_ADMIN_USER_IDS) can "
                "make me forget facts of this channel."
            )
            ref = str(command.get("text") or "")
            text = (await self.service.forget(key, ref, allowed=allowed, refusal=refusal)).text
        except Exception as e:
            log.exception("/forget failed")
            text = _user_message(e)
        await self._respond(respond, text, public=False)

    async def may_reset(self, user_id: str) -> bool:
        """Listed in ``SLACK_ADMIN_USER_IDS``, or a workspace admin or owner right now."""
        if user_id in self.settings.slack_admin_user_ids:
            return True
        user = await self.users.info(user_id, fresh=True)
        return bool(
            user and (user.get("is_admin") or user.get("is_owner") or user.get("is_primary_owner"))
        )

    async def _respond(self, respond: AsyncRespond, text: str, *, public: bool) -> None:
        kind = "in_channel" if public else "ephemeral"
        for chunk in format_reply(text, self.users.known())[:RESPONSE_URL_LIMIT]:
            r = await self._call("response_url", respond(text=chunk, response_type=kind))
            if r is None or getattr(r, "status_code", 200) >= 400:
                log.error("posting to response_url failed: %s", getattr(r, "body", r))
                return


# ---------------------------------------------------------------------- wiring


def build_app(
    runtime: Runtime,
    *,
    client: AsyncWebClient | None = None,
    adapter: SlackAdapter | None = None,
) -> AsyncApp:
    """A bolt ``AsyncApp`` with gistbot's listeners (nothing is started).

    Requests are signature-checked with ``SLACK_SIGNING_SECRET`` in HTTP mode (an unset
    secret rejects every HTTP request); Socket Mode requests need no signature.
    """
    settings = runtime.settings
    if adapter is None:
        adapter = SlackAdapter(runtime, client or make_web_client(settings))
    secret = settings.slack_signing_secret
    app = AsyncApp(
        name="gistbot",
        client=adapter.client,
        # explicit, so bolt never falls back to the process environment
        signing_secret=secret.get_secret_value() if secret else "",
        logger=logging.getLogger("gistbot.slack.bolt"),
    )
    adapter.register(app)
    return app


def http_app(app: AsyncApp, path: str = EVENTS_PATH) -> web.Application:
    """An aiohttp application that hands ``POST path`` to bolt (which verifies signatures)."""

    async def handle(request: web.Request) -> web.Response:
        response: web.Response = await to_aiohttp_response(
            await app.async_dispatch(await to_bolt_request(request))
        )
        return response

    web_app = web.Application()
    web_app.router.add_post(path, handle)
    return web_app


@contextlib.asynccontextmanager
async def serve_http(app: AsyncApp, host: str, port: int) -> AsyncIterator[str]:
    """Serve ``app`` in HTTP mode; yields the events URL (port 0 picks a free port)."""
    runner = web.AppRunner(http_app(app))
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound_host, bound_port = runner.addresses[0][:2]
        yield f"http://{bound_host}:{bound_port}{EVENTS_PATH}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def connect_socket_mode(
    app: AsyncApp, app_token: str, client: AsyncWebClient
) -> AsyncIterator[AsyncSocketModeHandler]:
    """Connect ``app`` over Socket Mode (``apps.connections.open`` with the app token)."""
    handler = AsyncSocketModeHandler(app, app_token, web_client=client)
    try:
        await handler.connect_async()  # type: ignore[no-untyped-call]  # bolt leaves it bare
        yield handler
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]


async def run_slack(
    runtime: Runtime,
    *,
    client: AsyncWebClient | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the Slack adapter until cancelled (or ``stop`` is set).

    Socket Mode when ``SLACK_APP_TOKEN`` is set, else HTTP mode on ``HOST:PORT``.
    Raises ``ConfigError`` when the bot token is rejected or neither mode is configured.
    """
    settings = runtime.settings
    if settings.slack_app_token is None and settings.slack_signing_secret is None:
        raise ConfigError(
            "Slack needs SLACK_APP_TOKEN (Socket Mode) or "
            "SLACK_SIGNING_SECRET (HTTP mode); set one of them"
        )
    adapter = SlackAdapter(runtime, client or make_web_client(settings))
    me = await adapter.identify()
    app = build_app(runtime, adapter=adapter)
    waiting = stop or asyncio.Event()  # never set: run until cancelled
    try:
        if settings.slack_app_token is not None:
            token = settings.slack_app_token.get_secret_value()
            async with connect_socket_mode(app, token, adapter.client):
                log.info("Slack: connected in Socket Mode as @%s (team %s)", me.name, me.team_id)
                await waiting.wait()
        else:
            async with serve_http(app, settings.host, settings.port) as url:
                log.info("Slack: HTTP mode as @%s, listening on %s", me.name, url)
                await waiting.wait()
    finally:
        await adapter.close()
