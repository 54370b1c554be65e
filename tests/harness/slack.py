"""The Slack harness: the real slack-bolt app of ``SlackAdapter`` served over HTTP on
loopback, Slack's side being ``tests.fakes.slack_api.FakeSlack``; events and commands are
posted with signatures computed here (v0 HMAC-SHA256 of ``v0:<timestamp>:<body>`` with the
signing secret). Memory is real SQLite; the language model is an in-process fake that
counts its calls.

Fixtures built from these (``llm``, ``env_extra``, ``h``) are in ``tests/conftest.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.app import SlackAdapter, build_app
from adapters.slack.events import PLACEHOLDER
from adapters.slack.transport import serve_http
from adapters.slack.web import make_web_client
from bot.app import Runtime
from bot.commands.declare import Registry
from bot.features.registry import COMMANDS
from bot.llm.client import Completion, Usage
from bot.settings import Settings, load_settings
from memory.completion import ChatMessage
from memory.models import ChannelKey, Turn
from tests.fakes.slack_api import FakeSlack

__all__ = [
    "KEY",
    "PLACEHOLDER",
    "SECRET",
    "TEAM",
    "TS",
    "FakeLLM",
    "Harness",
    "directory",
    "environ",
    "event_body",
    "make_adapter",
    "mention",
    "open_harness",
    "posts",
    "sign",
    "web_client",
]

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
_TRIGGERS = itertools.count(1)
TEAM = "T0TEAM"
KEY = ChannelKey("slack", TEAM, "C1")
TS = "1700000000.000100"


class FakeLLM:
    """Replies from a queue (then ``default``); digests say ``digest``. Counts reply calls.

    ``gate``, when set, holds every reply until it is released; ``stream`` yields the reply
    word by word, ``pause`` seconds apart.
    """

    name = "fake-llm"
    is_offline = False

    def __init__(self) -> None:
        self.replies: deque[str] = deque()
        self.default = "Hello from the model."
        self.digest = "Alice asked about order 1234; Bob promised to check it."
        self.reply_calls = 0
        self.purposes: list[str] = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self.pause = 0.0
        self.echo = False  # answer "You said: <the last message>" instead of ``default``
        self.prompts: list[list[ChatMessage]] = []  # what each reply call was sent

    async def _reply_text(self, messages: Sequence[ChatMessage]) -> str:
        self.reply_calls += 1
        self.prompts.append(list(messages))
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.replies:
            return self.replies.popleft()
        if self.echo:  # the answer says which message it answers
            last = messages[-1] if len(messages) > 1 else None
            return f"You said: {last['content'] if last else '(nothing)'}"
        return self.default

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> Completion:
        self.purposes.append(purpose)
        text = await self._reply_text(messages) if purpose == "reply" else self.digest
        return Completion(text, Usage(), self.name)

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[str]:
        self.purposes.append(purpose)
        text = await self._reply_text(messages)
        for i, word in enumerate(text.split(" ")):
            await asyncio.sleep(self.pause)
            yield word if i == 0 else " " + word


def sign(body: str, *, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


def event_body(event: dict[str, Any], *, event_id: str = "Ev001") -> dict[str, Any]:
    return {
        "token": "legacy-verification-token", "team_id": TEAM, "api_app_id": "A0APP",
        "event": {"team": TEAM, "event_ts": event.get("ts", TS), **event},
        "type": "event_callback", "event_id": event_id, "event_time": int(time.time()),
        "authorizations": [{"team_id": TEAM, "user_id": "UBOT", "is_bot": True}],
    }  # fmt: skip


def mention(
    text: str = "<@UBOT> what about order 1234?",
    *,
    ts: str = TS,
    user: str = "U1",
    channel: str = "C1",
    kind: str = "app_mention",
    **extra: Any,
) -> dict[str, Any]:
    event = {"type": kind, "user": user, "text": text, "ts": ts, "channel": channel, **extra}
    if kind == "message":
        event.setdefault("channel_type", "im" if channel.startswith("D") else "channel")
    return event


@dataclass
class Harness:
    fake: FakeSlack
    rt: Runtime
    llm: FakeLLM
    adapter: SlackAdapter
    url: str
    http: aiohttp.ClientSession

    async def post(self, body: str, content_type: str, headers: dict[str, str]) -> tuple[int, str]:
        async with self.http.post(
            self.url, data=body.encode(), headers={"Content-Type": content_type, **headers}
        ) as r:
            return r.status, await r.text()

    async def event(
        self, event: dict[str, Any], *, event_id: str = "Ev001", retry: int | None = None
    ) -> int:
        body = json.dumps(event_body(event, event_id=event_id))
        headers = sign(body)
        if retry is not None:
            headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
        status, _ = await self.post(body, "application/json", headers)
        return status

    async def command(
        self, name: str, *, user: str = "U1", text: str = "", channel: str = "C1"
    ) -> tuple[int, str]:
        body = urlencode({
            "token": "legacy", "team_id": TEAM, "team_domain": "fake", "channel_id": channel,
            "channel_name": "general", "user_id": user, "user_name": user.lower(),
            "command": name, "text": text, "api_app_id": "A0APP",
            "is_enterprise_install": "false",
            "response_url": self.fake.response_url(name[1:], channel),
            "trigger_id": f"{next(_TRIGGERS)}.{time.time_ns()}",  # one per use, as Slack
        })  # fmt: skip
        return await self.post(body, "application/x-www-form-urlencoded", sign(body))

    async def settle(self) -> None:
        assert await self.adapter.drain(within=10), "adapter work did not finish in time"

    async def turns(self, key: ChannelKey = KEY) -> list[Turn]:
        return await self.rt.store.turns(key)


def environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'gistbot.db'}",
        "SLACK_BOT_TOKEN": "xoxb-test-token",
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_ADMIN_USER_IDS": "UCONF",
        **extra,
    }


def directory(fake: FakeSlack) -> None:
    """The workspace's people (each a member of every channel unless a test says otherwise,
    ``FakeSlack.members``); UCONF is no admin, but listed in ``SLACK_ADMIN_USER_IDS``."""
    fake.add_user("U1", "Alice")
    fake.add_user("U2", "Bob", is_admin=True)
    fake.add_user("U3", "Carol", is_owner=True)
    fake.add_user("UCONF", "Conf")


def web_client(settings: Settings, api_url: str) -> AsyncWebClient:
    """The bot's Web API client for ``settings``, talking to the fake at ``api_url``."""
    return make_web_client(settings.slack, base_url=api_url,
                           timeout=settings.chat.post_timeout)


def make_adapter(rt: Runtime, api_url: str, commands: Registry = COMMANDS, *,
                 stream_interval: float | None = None,
                 post_timeout: float | None = None) -> SlackAdapter:
    """An adapter for ``rt``'s service offering ``commands`` (``stream_interval``: seconds
    between the edits of a streamed reply, ``post_timeout``: seconds a Web API call may take,
    instead of the settings')."""
    settings = rt.settings
    update = {"stream_interval": stream_interval, "post_timeout": post_timeout}
    if any(v is not None for v in update.values()):
        chat = settings.chat.model_copy(update={k: v for k, v in update.items() if v is not None})
        settings = settings.model_copy(update={"chat": chat})
    client = make_web_client(settings.slack, base_url=api_url,
                             timeout=settings.chat.post_timeout)
    return SlackAdapter(rt.features, settings, client, commands)


@contextlib.asynccontextmanager
async def open_harness(
    tmp_path: Path, llm: FakeLLM | None, env_extra: dict[str, str],
    commands: Registry = COMMANDS, *, post_timeout: float | None = None,
) -> AsyncIterator[Harness]:
    """A fake Slack with ``directory``'s users, a runtime and the adapter served over HTTP.
    ``llm`` None: the runtime's own model from the settings (``OPENAI_BASE_URL`` at the
    loopback OpenAI fake), and ``Harness.llm`` is an unused stand-in."""
    async with FakeSlack() as fake:
        directory(fake)
        settings = load_settings(environ=environ(tmp_path, **env_extra), env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            adapter = make_adapter(rt, fake.api_url, commands, stream_interval=0.2,
                                   post_timeout=post_timeout)
            app = build_app(adapter)
            async with serve_http(app, "127.0.0.1", 0) as url, aiohttp.ClientSession() as http:
                yield Harness(fake, rt, llm or FakeLLM(), adapter, url, http)
            await adapter.close()


def posts(fake: FakeSlack, *, besides_placeholder: bool = True) -> list[dict[str, Any]]:
    return [
        c.params
        for c in fake.calls_to("chat.postMessage")
        if not besides_placeholder or c.params.get("text") != PLACEHOLDER
    ]
