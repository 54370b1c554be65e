"""A loopback fake of the Slack Web API, of ``response_url`` and of the Socket Mode websocket.

Serves on 127.0.0.1, port 0, so tests drive the real ``slack_sdk`` client and the real bolt
app over the wire:

- ``/api/<method>`` (GET or POST; query, form or JSON parameters) answers ``auth.test``,
  ``chat.postMessage``, ``chat.update``, ``chat.delete``, ``chat.postEphemeral``,
  ``users.info``, ``conversations.info``, ``conversations.history``,
  ``conversations.replies`` (what :meth:`FakeSlack.post` put in a channel and what the
  bot posted, paged by cursor), ``conversations.members`` (``members``: a channel's member
  ids when set, else everyone in the directory and the bot; paged by cursor),
  ``chat.getPermalink``, ``apps.connections.open`` and the assistant threads' decoration
  (``assistant.threads.setStatus``, ``.setSuggestedPrompts``, ``.setTitle``: each needs
  ``channel_id`` and ``thread_ts``, and its ``status``, ``prompts`` or ``title``) like
  Slack does. The bot's messages keep their ``metadata`` (``chat.postMessage``, changed by
  ``chat.update``) and are read back with it only when ``include_all_metadata`` is set;
  ``chat.update`` and ``chat.delete`` change the stored message (see :meth:`bot_messages`),
  and checks the token (bot token for the Web API, app token for ``apps.connections.open``;
  a wrong one gets ``invalid_auth``).
- ``/response/<name>`` accepts ``response_url`` posts (see :meth:`FakeSlack.response_url`);
  one ``in_channel`` is a message of the bot in the channel the URL names, with its
  ``metadata``. Scripted answers apply to it as method ``response_url:<name>``.
- ``/socket`` is the websocket ``apps.connections.open`` points at: it sends ``hello`` on
  connect, then whatever the test sends with :meth:`FakeSlack.socket_send`, and records
  what the client sends back (the acks).

Every request is recorded as a :class:`Call` (method name, merged parameters, token, time).
A test can queue answers per method with :meth:`FakeSlack.script` (``rate_limited()``,
``api_error("invalid_auth")``, ``faulty(Fault.AFTER_500)``, ``Answer()`` for a normal one…);
queued answers are used before the defaults. ``faulty`` is the switch of
``tests.fakes.faults``: any method can be made to fail before it takes effect, or to take
effect and then answer 500, reset the connection, hang, or answer 429.

It fails loudly: a call to a method it does not know is answered ``unknown_method`` and, like
a scripted answer never used, makes leaving ``async with`` raise ``AssertionError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

from tests.fakes.faults import Fault, cut
from tests.fakes.file_host import FileHost
from tests.harness.deadlines import scaled

__all__ = ["Answer", "Call", "FakeSlack", "api_error", "faulty", "rate_limited"]

JSON = dict[str, Any]
KNOWN = (
    "auth.test", "chat.postMessage", "chat.update", "chat.delete", "chat.postEphemeral",
    "users.info", "conversations.info", "apps.connections.open", "chat.getPermalink",
    "conversations.history", "conversations.replies", "conversations.members",
    *(f"assistant.threads.{m}" for m in ("setStatus", "setSuggestedPrompts", "setTitle")),
)  # fmt: skip
_ASSISTANT_FIELD = {"assistant.threads.setStatus": "status",
                    "assistant.threads.setSuggestedPrompts": "prompts",
                    "assistant.threads.setTitle": "title"}


@dataclass(frozen=True)
class Call:
    """One request: ``method`` is the API method name, or ``response_url:<name>``."""

    method: str
    params: JSON
    token: str | None
    at: float  # time.monotonic()
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """A scripted answer: ``body`` None means "what the default would have said" (and did:
    the call takes effect); ``perform`` makes a call with a scripted ``body`` take effect
    too; ``fault`` AFTER_RESET or AFTER_HANG cuts the request after that, unanswered;
    ``until``: the answer is held back until that event is set (a slow Slack)."""

    status: int = 200
    body: JSON | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    perform: bool = False
    fault: Fault | None = None
    until: asyncio.Event | None = None


def rate_limited(retry_after: int = 1) -> Answer:
    """HTTP 429 with ``Retry-After``, as Slack sends it."""
    return Answer(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)})


def faulty(fault: Fault, *, retry_after: int = 0) -> Answer:
    """The answer of ``fault`` (``tests.fakes.faults``) to any method."""
    if fault is Fault.RATE_LIMITED:
        return rate_limited(retry_after)
    return Answer(500, {"ok": False, "error": "fatal_error"}, perform=fault.performs,
                  fault=fault if fault.cuts else None)


def api_error(error: str) -> Answer:
    """HTTP 200 with ``ok: false`` (how Slack reports ``invalid_auth``, ``not_in_channel``…)."""
    return Answer(200, {"ok": False, "error": error})


class FakeSlack:
    """The fake; use as ``async with FakeSlack() as slack:``."""

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-test-token",
        app_token: str = "xapp-test-token",
        team_id: str = "T0TEAM",
        bot_user_id: str = "UBOT",
        bot_id: str = "BBOT",
        bot_name: str = "gistbot",
    ) -> None:
        self.bot_token, self.app_token = bot_token, app_token
        self.team_id, self.bot_user_id, self.bot_id, self.bot_name = (
            team_id, bot_user_id, bot_id, bot_name)  # fmt: skip
        self.users: dict[str, JSON] = {}
        self.channels: defaultdict[str, list[JSON]] = defaultdict(list)  # history, by channel
        self.members: dict[str, list[str]] = {}  # member ids of the channels that say
        self.calls: list[Call] = []
        self.unexpected: list[Call] = []
        self.socket_received: list[JSON] = []
        self.socket_connections = 0
        self._scripts: defaultdict[str, deque[Answer]] = defaultdict(deque)
        self._ts = itertools.count(1)
        self._changed = asyncio.Condition()
        self._closing = asyncio.Event()  # set on leaving: hung requests end
        self._sockets: list[web.WebSocketResponse] = []
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        self.files = FileHost("/files-pri", token=bot_token)  # url_private, bot token only

    # ------------------------------------------------------------------ setup

    def add_user(self, user_id: str, display_name: str, *, real_name: str | None = None,
                 is_admin: bool = False, is_owner: bool = False,
                 locale: str = "en-US") -> None:
        """Put a user into the directory ``users.info`` answers from (``locale`` only when
        asked with ``include_locale``, as Slack does)."""
        self.users[user_id] = {
            "id": user_id, "team_id": self.team_id, "name": display_name.lower(),
            "real_name": real_name or display_name, "is_admin": is_admin,
            "is_owner": is_owner, "is_primary_owner": False, "is_bot": False,
            "profile": {"display_name": display_name, "real_name": real_name or display_name},
            "locale": locale,
        }  # fmt: skip

    def bot_messages(self, channel: str) -> list[JSON]:
        """The bot's messages in ``channel`` as they stand now (updated, not deleted)."""
        return [m for m in self.channels.get(channel, []) if m.get("bot_id") == self.bot_id]

    def post(self, channel: str, user: str, text: str, *, thread_ts: str | None = None,
             **extra: Any) -> JSON:
        """Someone posts ``text`` (in a thread with ``thread_ts``): it is in the channel's
        history, nothing is delivered. Returns the message (``ts`` is new)."""
        ts = self._next_ts()
        msg: JSON = {"type": "message", "user": user, "text": text, "ts": ts,
                     "team": self.team_id, **extra}
        if thread_ts is not None:
            msg["thread_ts"] = thread_ts
            parent = next(m for m in self.channels[channel] if m["ts"] == thread_ts)
            parent.update(thread_ts=thread_ts, reply_count=parent.get("reply_count", 0) + 1,
                          latest_reply=ts)
        self.channels[channel].append(msg)
        return msg

    async def drop_sockets(self) -> None:
        """Close every Socket Mode connection (the client reconnects)."""
        for ws in list(self._sockets):
            await ws.close()

    def script(self, method: str, *answers: Answer) -> None:
        """Answer the next calls of ``method`` with ``answers``, in order."""
        self._scripts[method].extend(answers)

    @property
    def api_url(self) -> str:
        """The Web API base URL for ``AsyncWebClient(base_url=...)``."""
        return f"{self.base_url}/api/"

    def response_url(self, name: str = "command", channel: str | None = None) -> str:
        """A ``response_url`` to put into a slash command payload (``channel``: where an
        ``in_channel`` answer to it shows)."""
        where = f"?channel={channel}" if channel else ""
        return f"{self.base_url}/response/{name}{where}"

    async def __aenter__(self) -> FakeSlack:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/response/{name}", self._response_url)
        app.router.add_get("/socket", self._socket)
        self.files.mount(app)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}"
        self.files.base_url = self.base_url
        return self

    def file(self, name: str, data: bytes, mimetype: str = "text/plain", *,
             size: int | None = None, url: str | None = None, **how: Any) -> JSON:
        """A file object for a message event's ``files``, served at its ``url_private``
        to the bot token only (``url``: announce another URL)."""
        hosted = self.files.add(name, data, mimetype, **how)
        return {"id": f"F{len(self.files.files):08d}", "name": name, "title": name,
                "mimetype": mimetype, "size": len(data) if size is None else size,
                "url_private": url or hosted, "url_private_download": url or hosted,
                "mode": "hosted"}

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        self._closing.set()
        for ws in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if exc_type is not None:
            return
        left = {m: len(q) for m, q in self._scripts.items() if q}
        problems = []
        if self.unexpected:
            problems.append(f"calls the fake does not know: {[c.method for c in self.unexpected]}")
        if left:
            problems.append(f"scripted answers never requested: {left}")
        if problems:
            raise AssertionError("; ".join(problems))

    # ------------------------------------------------------------------ queries

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of one method, oldest first."""
        return [c for c in self.calls if c.method == method]

    async def wait_for(self, method: str, count: int = 1, within: float = 5.0) -> list[Call]:
        """Wait until ``method`` was called ``count`` times; the calls (AssertionError after
        ``within`` seconds, naming what did arrive)."""
        await self._wait(lambda: len(self.calls_to(method)) >= count, within, f"{count}× {method}")
        return self.calls_to(method)

    async def wait_until(self, done: Callable[[], bool], within: float = 5.0,
                         what: str = "a condition") -> None:
        """Wait until ``done()`` holds, checked after every call (AssertionError after
        ``within`` seconds)."""
        await self._wait(done, within, what)

    async def wait_socket_ack(self, envelope_id: str, within: float = 5.0) -> JSON:
        """Wait for the client's acknowledgement of one envelope; the ack."""

        def find() -> JSON | None:
            return next((m for m in self.socket_received if m.get("envelope_id") == envelope_id),
                        None)

        await self._wait(lambda: find() is not None, within, f"ack of {envelope_id}")
        ack = find()
        assert ack is not None
        return ack

    async def _wait(self, done: Callable[[], bool], within: float, what: str) -> None:
        try:
            async with asyncio.timeout(scaled(within)):
                async with self._changed:
                    await self._changed.wait_for(done)
        except TimeoutError:
            seen = [c.method for c in self.calls]
            raise AssertionError(f"timed out waiting for {what}; calls so far: {seen}") from None

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------------ socket mode

    async def socket_send(self, message: JSON, within: float = 5.0) -> None:
        """Send ``message`` to the (first) connected Socket Mode client."""
        await self._wait(lambda: bool(self._sockets), within, "a socket client")
        await self._sockets[0].send_str(json.dumps(message))

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.socket_connections += 1
        await ws.send_str(json.dumps({
            "type": "hello", "num_connections": 1,
            "debug_info": {"host": "fake", "approximate_connection_time": 3600},
            "connection_info": {"app_id": "A0APP"},
        }))  # fmt: skip
        self._sockets.append(ws)
        await self._notify()
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self.socket_received.append(json.loads(msg.data))
                    await self._notify()
        finally:
            self._sockets.remove(ws)
        return ws

    # ------------------------------------------------------------------ HTTP

    async def _params(self, request: web.Request) -> JSON:
        params: JSON = dict(request.query)
        if request.can_read_body:
            raw = await request.text()
            if request.content_type == "application/json":
                params.update(json.loads(raw or "{}"))
            else:
                params.update(parse_qsl(raw, keep_blank_values=True))
        return params

    async def _record(self, method: str, request: web.Request) -> Call:
        params = await self._params(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() or params.get("token")
        call = Call(method, params, token, time.monotonic(), dict(request.headers))
        self.calls.append(call)
        await self._notify()
        return call

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        call = await self._record(method, request)
        queue = self._scripts.get(method)
        if queue:
            answer = queue.popleft()
            if answer.until is not None:
                await answer.until.wait()
            done = self._default(call) if answer.body is None or answer.perform else None
            await self._notify()
            if answer.fault is not None:
                return await cut(request, answer.fault, self._closing)
            body = answer.body if answer.body is not None else done
            return web.json_response(body, status=answer.status, headers=dict(answer.headers))
        if method not in KNOWN:
            self.unexpected.append(call)
            return web.json_response({"ok": False, "error": "unknown_method"})
        return web.json_response(self._default(call))

    async def _response_url(self, request: web.Request) -> web.Response:
        method = f"response_url:{request.match_info['name']}"
        call = await self._record(method, request)
        queue = self._scripts.get(method)
        answer = queue.popleft() if queue else Answer(body={})
        if answer.status == 200 or answer.perform:
            self._answered(call, request.query.get("channel"))
        await self._notify()
        if answer.fault is not None:
            return await cut(request, answer.fault, self._closing)
        if answer.status != 200:
            return web.json_response(answer.body, status=answer.status,
                                     headers=dict(answer.headers))
        return web.Response(text="ok")

    def _answered(self, call: Call, channel: str | None) -> None:
        """An ``in_channel`` answer to a command is the bot's message in ``channel``."""
        p = call.params
        if channel is None or p.get("response_type") != "in_channel":
            return
        message: JSON = {"type": "message", "text": p.get("text"), "ts": self._next_ts(),
                         "user": self.bot_user_id, "bot_id": self.bot_id, "team": self.team_id}
        if meta := _metadata(p):
            message["metadata"] = meta
        self.channels[channel].append(message)

    def _next_ts(self) -> str:
        return f"1800000000.{next(self._ts):06d}"

    def _read(self, method: str, p: JSON) -> JSON:
        """A page of history (newest first, top-level messages and broadcasts) or of a
        thread (parent first, then replies oldest first), like Slack."""
        every = self.channels.get(str(p.get("channel")))
        if every is None:
            return {"ok": False, "error": "channel_not_found"}
        inclusive = str(p.get("inclusive", "")).lower() in ("1", "true")

        def within(m: JSON) -> bool:
            ts, lo, hi = float(m["ts"]), p.get("oldest"), p.get("latest")
            if lo is not None and (ts < float(lo) or (ts == float(lo) and not inclusive)):
                return False
            return hi is None or ts < float(hi) or (ts == float(hi) and inclusive)

        if method == "conversations.history":
            found = [m for m in reversed(every) if within(m) and (
                m.get("thread_ts") in (None, m["ts"]) or m.get("subtype") == "thread_broadcast")]
        else:
            parent = p.get("ts")
            thread = [m for m in every if parent in (m.get("thread_ts"), m["ts"])]
            if not thread:
                return {"ok": False, "error": "thread_not_found"}
            found = thread[:1] + [m for m in thread[1:] if within(m)]
        start = int(str(p.get("cursor") or "next:0").split(":")[1])
        limit = int(p.get("limit") or 100)
        page, rest = found[start:start + limit], found[start + limit:]
        metadata = str(p.get("include_all_metadata", "")).lower() in ("1", "true")
        page = [m if metadata else {k: v for k, v in m.items() if k != "metadata"}
                for m in page]
        return {"ok": True, "messages": [dict(m) for m in page], "has_more": bool(rest),
                "response_metadata": {"next_cursor": f"next:{start + limit}" if rest else ""}}

    def _members(self, p: JSON) -> JSON:
        """A page of a conversation's member ids, as Slack pages them."""
        channel = str(p.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        every = self.members.get(channel, [*self.users, self.bot_user_id])
        start = int(str(p.get("cursor") or "next:0").split(":")[1])
        limit = int(p.get("limit") or 100)
        page, rest = every[start:start + limit], every[start + limit:]
        return {"ok": True, "members": page,
                "response_metadata": {"next_cursor": f"next:{start + limit}" if rest else ""}}

    def _default(self, call: Call) -> JSON:
        p = call.params
        expected = self.app_token if call.method == "apps.connections.open" else self.bot_token
        if call.token != expected:
            return {"ok": False, "error": "invalid_auth" if call.token else "not_authed"}
        if call.method == "auth.test":
            return {"ok": True, "url": "https://fake.slack.test/", "team": "Fake Team",
                    "user": self.bot_name, "team_id": self.team_id, "user_id": self.bot_user_id,
                    "bot_id": self.bot_id, "is_enterprise_install": False}
        if call.method == "chat.postMessage":
            if not p.get("channel") or not (p.get("text") or p.get("blocks")):
                error = "no_text" if p.get("channel") else "channel_not_found"
                return {"ok": False, "error": error}
            ts = self._next_ts()
            message: JSON = {"type": "message", "text": p.get("text"), "ts": ts,
                             "user": self.bot_user_id, "bot_id": self.bot_id,
                             "team": self.team_id}
            if p.get("thread_ts"):
                message["thread_ts"] = p["thread_ts"]
            if meta := _metadata(p):
                message["metadata"] = meta
            self.channels[str(p["channel"])].append(message)
            return {"ok": True, "channel": p["channel"], "ts": ts,
                    "message": {**message, "thread_ts": p.get("thread_ts")}}
        if call.method == "chat.update":
            for m in self.channels.get(str(p.get("channel")), []):
                if m["ts"] == p.get("ts"):
                    m["text"] = p.get("text")
                    if meta := _metadata(p):
                        m["metadata"] = meta
            return {"ok": True, "channel": p.get("channel"), "ts": p.get("ts"),
                    "text": p.get("text")}
        if call.method == "chat.delete":
            kept = self.channels.get(str(p.get("channel")))
            if kept is not None:
                kept[:] = [m for m in kept if m["ts"] != p.get("ts")]
            return {"ok": True, "channel": p.get("channel"), "ts": p.get("ts")}
        if call.method == "chat.postEphemeral":
            return {"ok": True, "message_ts": self._next_ts()}
        if call.method == "users.info":
            user = self.users.get(str(p.get("user")))
            if user is None:
                return {"ok": False, "error": "user_not_found"}
            if str(p.get("include_locale")).lower() not in ("true", "1"):
                user = {k: v for k, v in user.items() if k != "locale"}
            return {"ok": True, "user": user}
        if call.method == "conversations.info":
            cid = str(p.get("channel"))
            return {"ok": True, "channel": {"id": cid, "is_channel": cid.startswith("C"),
                                            "is_im": cid.startswith("D"), "is_member": True}}
        if call.method in ("conversations.history", "conversations.replies"):
            return self._read(call.method, p)
        if call.method == "conversations.members":
            return self._members(p)
        if call.method == "chat.getPermalink":
            return permalink(p)
        if field_ := _ASSISTANT_FIELD.get(call.method):
            if not p.get("channel_id") or not p.get("thread_ts") or p.get(field_) is None:
                return {"ok": False, "error": "invalid_arguments"}
            return {"ok": True}
        if call.method == "apps.connections.open":
            return {"ok": True, "url": self.base_url.replace("http://", "ws://") + "/socket"}
        return {"ok": False, "error": "unknown_method"}


def _metadata(p: JSON) -> JSON | None:
    """The ``metadata`` parameter (a JSON object, or its text in a form post)."""
    meta = p.get("metadata")
    if isinstance(meta, str) and meta:
        meta = json.loads(meta)
    return meta if isinstance(meta, dict) and meta.get("event_type") else None


def permalink(p: JSON) -> JSON:
    """``chat.getPermalink`` as Slack answers it (a thread reply would add ``thread_ts``)."""
    channel, ts = str(p.get("channel") or ""), str(p.get("message_ts") or "")
    if not channel or not ts:
        return {"ok": False, "error": "message_not_found"}
    return {"ok": True, "channel": channel,
            "permalink": f"https://fake.slack.test/archives/{channel}/p{ts.replace('.', '')}"}
