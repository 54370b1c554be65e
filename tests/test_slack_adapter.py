"""The Slack adapter driven through the real slack-bolt app, over HTTP and Socket Mode.

Slack's side is ``tests.fakes.slack_api.FakeSlack`` on loopback; events and commands are
posted to the adapter's real aiohttp endpoint with signatures computed here (v0 HMAC-SHA256
of ``v0:<timestamp>:<body>`` with the signing secret). Memory is real SQLite under tmp_path;
the language model is an in-process fake that counts its calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest

from adapters.slack_adapter import (
    PLACEHOLDER,
    SlackAdapter,
    build_app,
    make_web_client,
    run_slack,
    serve_http,
)
from adapters.slack_text import MESSAGE_LIMIT, WORD_JOINER, to_incoming
from bot.app import Runtime
from bot.errors import ConfigError
from bot.llm import Completion, Usage
from bot.settings import load_settings
from memory.completion import ChatMessage
from memory.models import ChannelKey, Turn
from tests.fakes.slack_api import FakeSlack, api_error, rate_limited

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
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

    async def _reply_text(self) -> str:
        self.reply_calls += 1
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        return self.replies.popleft() if self.replies else self.default

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> Completion:
        self.purposes.append(purpose)
        text = await self._reply_text() if purpose == "reply" else self.digest
        return Completion(text, Usage(), self.name)

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> AsyncIterator[str]:
        self.purposes.append(purpose)
        text = await self._reply_text()
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
            "is_enterprise_install": "false", "response_url": self.fake.response_url(name[1:]),
            "trigger_id": "1.2.3",
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
    fake.add_user("U1", "Alice")
    fake.add_user("U2", "Bob", is_admin=True)
    fake.add_user("U3", "Carol", is_owner=True)


@pytest.fixture
def llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def env_extra() -> dict[str, str]:
    return {}


@pytest.fixture
async def h(tmp_path: Path, llm: FakeLLM, env_extra: dict[str, str]) -> AsyncIterator[Harness]:
    async with FakeSlack() as fake:
        directory(fake)
        settings = load_settings(environ=environ(tmp_path, **env_extra), env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            adapter = SlackAdapter(
                rt, make_web_client(settings, base_url=fake.api_url), stream_interval=0.2
            )
            app = build_app(rt, adapter=adapter)
            async with serve_http(app, "127.0.0.1", 0) as url, aiohttp.ClientSession() as http:
                yield Harness(fake, rt, llm, adapter, url, http)
            await adapter.close()


def posts(fake: FakeSlack, *, besides_placeholder: bool = True) -> list[dict[str, Any]]:
    return [
        c.params
        for c in fake.calls_to("chat.postMessage")
        if not besides_placeholder or c.params.get("text") != PLACEHOLDER
    ]


# ---------------------------------------------------------------------- signatures


async def test_good_signature_accepted(h: Harness) -> None:
    body = json.dumps({"token": "x", "challenge": "c-123", "type": "url_verification"})
    status, text = await h.post(body, "application/json", sign(body))
    assert status == 200
    assert "c-123" in text
    assert await h.event(mention("just saying hi", kind="message")) == 200
    await h.settle()
    assert [t.text for t in await h.turns()] == ["just saying hi"]


async def test_bad_signature_rejected(h: Harness) -> None:
    body = json.dumps(event_body(mention()))
    status, _ = await h.post(body, "application/json", sign(body, secret="not-the-secret"))
    assert status == 401
    tampered = sign(body)
    status, _ = await h.post(body.replace("order 1234", "order 9999"), "application/json", tampered)
    assert status == 401
    await h.settle()
    assert await h.turns() == []
    assert h.fake.calls_to("chat.postMessage") == []


async def test_stale_timestamp_rejected(h: Harness) -> None:
    body = json.dumps(event_body(mention()))
    status, _ = await h.post(body, "application/json", sign(body, timestamp=int(time.time()) - 600))
    assert status == 401
    await h.settle()
    assert await h.turns() == []
    assert h.llm.reply_calls == 0


# ---------------------------------------------------------------------- events


async def test_mention_answered_in_its_thread(h: Harness) -> None:
    assert await h.event(mention()) == 200
    update = (await h.fake.wait_for("chat.update"))[0].params
    placeholder = h.fake.calls_to("chat.postMessage")[0].params
    assert placeholder["text"] == PLACEHOLDER
    assert placeholder["channel"] == "C1" and placeholder["thread_ts"] == TS
    assert update["ts"] == "1800000000.000001"  # the placeholder's ts, as the fake issued it
    assert update["text"] == "Hello from the model."
    await h.settle()
    turns = await h.turns()
    assert [(t.role, t.author_name) for t in turns] == [("user", "Alice"), ("assistant", "gistbot")]
    assert turns[0].text == "@gistbot what about order 1234?"
    assert turns[1].author_id == "UBOT"


async def test_thread_reply_goes_to_thread_and_channel_memory(h: Harness) -> None:
    event = mention(ts="1700000000.000200", thread_ts="1700000000.000100", kind="message")
    assert await h.event(event) == 200
    await h.fake.wait_for("chat.update")
    assert h.fake.calls_to("chat.postMessage")[0].params["thread_ts"] == "1700000000.000100"
    await h.settle()
    assert len(await h.turns(KEY)) == 2


async def test_ack_comes_before_the_work(h: Harness, llm: FakeLLM) -> None:
    llm.gate = asyncio.Event()
    async with asyncio.timeout(3):  # Slack's deadline
        assert await h.event(mention()) == 200
    await asyncio.wait_for(llm.entered.wait(), 5)
    assert h.fake.calls_to("chat.update") == []  # still thinking, but Slack has its 200
    llm.gate.set()
    await h.fake.wait_for("chat.update")


async def test_redelivery_and_mention_twin_give_one_turn_one_reply(h: Harness) -> None:
    assert await h.event(mention(), event_id="Ev1") == 200
    assert await h.event(mention(kind="message"), event_id="Ev2") == 200  # the twin
    assert await h.event(mention(), event_id="Ev1", retry=1) == 200
    await h.settle()
    assert await h.event(mention(), event_id="Ev1", retry=2) == 200
    await h.settle()
    assert h.llm.reply_calls == 1
    assert [t.role for t in await h.turns()] == ["user", "assistant"]
    assert len(h.fake.calls_to("chat.postMessage")) == 1
    assert len(h.fake.calls_to("chat.update")) == 1


async def test_second_replica_does_not_answer_again(h: Harness) -> None:
    """Two replicas (HTTP mode behind a load balancer, each with its own store connection to
    the shared database) get the same event: the claim in the database and the idempotent
    record decide; the second replica posts nothing at all."""
    async with Runtime.open(h.rt.settings, llm=h.llm) as other_rt:
        other = SlackAdapter(other_rt, make_web_client(h.rt.settings, base_url=h.fake.api_url))
        await _second_replica(h, other)


async def _second_replica(h: Harness, other: SlackAdapter) -> None:
    async with serve_http(build_app(other.runtime, adapter=other), "127.0.0.1", 0) as url:
        assert await h.event(mention()) == 200
        await h.settle()
        body = json.dumps(event_body(mention()))
        async with h.http.post(
            url, data=body, headers={"Content-Type": "application/json", **sign(body)}
        ) as r:
            assert r.status == 200
        assert await other.drain(within=10)
    await other.close()
    assert h.llm.reply_calls == 1
    assert [t.role for t in await h.turns()] == ["user", "assistant"]
    assert len(h.fake.calls_to("chat.postMessage")) == 1
    assert len(h.fake.calls_to("chat.update")) == 1
    assert h.fake.calls_to("chat.delete") == []


async def test_channel_message_recorded_readable_without_reply(h: Harness) -> None:
    text = "<@U2> please check <https://example.com/x|the doc> &amp; <#C9|random> &lt;3"
    assert await h.event(mention(text, kind="message")) == 200
    await h.settle()
    [turn] = await h.turns()
    assert turn.text == "@Bob please check the doc (https://example.com/x) & #random <3"
    assert (turn.author_id, turn.author_name, turn.message_id) == ("U1", "Alice", TS)
    assert h.fake.calls_to("chat.postMessage") == []
    assert h.llm.reply_calls == 0
    looked_up = sorted(c.params["user"] for c in h.fake.calls_to("users.info"))
    assert looked_up == ["U1", "U2"]
    assert await h.event(mention("again", kind="message", ts="1700000000.000300")) == 200
    await h.settle()
    assert len(h.fake.calls_to("users.info")) == 2  # names are cached


async def test_direct_message_answered(h: Harness) -> None:
    assert await h.event(mention("hello there", kind="message", channel="D1")) == 200
    update = (await h.fake.wait_for("chat.update"))[0].params
    assert update["channel"] == "D1"
    await h.settle()
    assert [t.role for t in await h.turns(ChannelKey("slack", TEAM, "D1"))] == ["user", "assistant"]


async def test_bots_itself_and_non_conversation_subtypes_skipped(h: Harness) -> None:
    skipped = [
        {
            "type": "message",
            "subtype": "bot_message",
            "bot_id": "B9",
            "text": "<@UBOT> hi",
            "ts": "1700000000.000001",
            "channel": "C1",
        },
        {
            "type": "message",
            "user": "U9",
            "bot_id": "B9",
            "text": "<@UBOT> hi",
            "ts": "1700000000.000002",
            "channel": "C1",
        },
        {
            "type": "message",
            "user": "UBOT",
            "text": "my own words",
            "ts": "1700000000.000003",
            "channel": "C1",
        },
        {
            "type": "message",
            "subtype": "channel_join",
            "user": "U1",
            "text": "<@U1> has joined the channel",
            "ts": "1700000000.000004",
            "channel": "C1",
        },
        {
            "type": "message",
            "subtype": "channel_topic",
            "user": "U1",
            "text": "set the topic",
            "ts": "1700000000.000005",
            "channel": "C1",
        },
    ]
    for i, event in enumerate(skipped):
        assert await h.event(event, event_id=f"Ev{i}") == 200
    await h.settle()
    assert await h.turns() == []
    assert h.fake.calls_to("chat.postMessage") == [] and h.llm.reply_calls == 0


async def test_file_share_without_text_is_remembered(h: Harness) -> None:
    event = mention(
        "",
        kind="message",
        subtype="file_share",
        files=[{"id": "F1", "name": "report.pdf", "title": "Q3 report"}],
    )
    assert await h.event(event) == 200
    await h.settle()
    assert [t.text for t in await h.turns()] == ["[file: report.pdf]"]


async def test_edit_and_delete(h: Harness) -> None:
    assert await h.event(mention("order 1234 ships Monday", kind="message")) == 200
    await h.settle()
    edited = {
        "type": "message", "subtype": "message_changed", "hidden": True, "channel": "C1",
        "ts": "1700000000.000900",
        "message": {"type": "message", "user": "U1", "text": "order 1234 ships <@U2> Tuesday",
                    "ts": TS},
        "previous_message": {"type": "message", "user": "U1", "text": "order 1234 ships Monday",
                             "ts": TS},
    }  # fmt: skip
    assert await h.event(edited, event_id="Ev2") == 200
    await h.settle()
    assert [t.text for t in await h.turns()] == ["order 1234 ships @Bob Tuesday"]
    deleted = {
        "type": "message",
        "subtype": "message_deleted",
        "hidden": True,
        "channel": "C1",
        "ts": "1700000000.000901",
        "deleted_ts": TS,
        "previous_message": {"type": "message", "user": "U1", "text": "x", "ts": TS},
    }
    assert await h.event(deleted, event_id="Ev3") == 200
    await h.settle()
    assert await h.turns() == []


# ---------------------------------------------------------------------- outgoing text


async def test_pings_in_model_output_neutralised(h: Harness, llm: FakeLLM) -> None:
    llm.replies.append(
        "**Heads up** <!channel> <!here|here> <!everyone> and <@U123>, "
        "also @here and <!subteam^S1|@devs> — see [the doc](https://x.test/a?b=1&c=2)"
    )
    assert await h.event(mention()) == 200
    text = (await h.fake.wait_for("chat.update"))[0].params["text"]
    for ping in ("<!channel>", "<!here", "<!everyone>", "<@U123>", "<!subteam", "@here"):
        assert ping not in text
    assert f"@{WORD_JOINER}channel" in text and f"@{WORD_JOINER}U123" in text
    assert text.startswith("*Heads up*")
    assert "<https://x.test/a?b=1&amp;c=2|the doc>" in text


async def test_long_reply_split_into_thread_messages(h: Harness, llm: FakeLLM) -> None:
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum dolor " * 30 for i in range(20)]
    llm.replies.append("\n\n".join(paragraphs))
    assert await h.event(mention()) == 200
    await h.fake.wait_for("chat.update")
    await h.settle()
    first = h.fake.calls_to("chat.update")[0].params["text"]
    rest = posts(h.fake)
    messages = [first, *(p["text"] for p in rest)]
    assert len(messages) >= 3
    assert all(len(m) <= MESSAGE_LIMIT for m in messages)
    assert all(p["thread_ts"] == TS for p in rest)
    joined = "\n\n".join(messages)
    positions = [joined.index(f"Paragraph {i}:") for i in range(20)]
    assert positions == sorted(positions)


async def test_rate_limited_post_retried_after_retry_after(h: Harness) -> None:
    h.fake.script("chat.postMessage", rate_limited(retry_after=1))
    assert await h.event(mention()) == 200
    update = (await h.fake.wait_for("chat.update", within=10))[0].params
    first, second = h.fake.calls_to("chat.postMessage")
    assert second.at - first.at >= 1.0
    assert second.params["text"] == PLACEHOLDER
    assert update["ts"] == "1800000000.000001"  # the retried post's placeholder was updated


@pytest.mark.parametrize("env_extra", [{"STREAM_REPLIES": "true"}])
async def test_streamed_reply_updates_at_most_once_per_interval(h: Harness, llm: FakeLLM) -> None:
    llm.default = " ".join(f"w{i}" for i in range(12))
    llm.pause = 0.05  # 0.6 s of streaming against the 0.2 s interval of this harness
    assert await h.event(mention()) == 200
    await h.fake.wait_for("chat.update")
    await h.settle()
    updates = h.fake.calls_to("chat.update")
    assert updates[-1].params["text"] == llm.default
    interim = updates[:-1]
    assert 1 <= len(interim) <= 4
    assert all(u.params["text"].endswith(" …") for u in interim)
    gaps = [b.at - a.at for a, b in itertools.pairwise(interim)]
    assert all(g >= 0.2 for g in gaps)


async def test_failed_post_of_placeholder_still_delivers_answer(h: Harness) -> None:
    h.fake.script("chat.postMessage", api_error("not_in_channel"))
    assert await h.event(mention()) == 200
    await h.settle()
    texts = [c.params["text"] for c in h.fake.calls_to("chat.postMessage")]
    assert texts == [PLACEHOLDER, "Hello from the model."]
    assert h.fake.calls_to("chat.update") == []


# ---------------------------------------------------------------------- commands


async def _two_messages(h: Harness) -> None:
    assert await h.event(mention("order 1234 is late", kind="message")) == 200
    assert (
        await h.event(
            mention("I'll check it", user="U2", kind="message", ts="1700000000.000200"),
            event_id="Ev2",
        )
        == 200
    )
    await h.settle()


async def test_summary_is_ephemeral_by_default(h: Harness) -> None:
    await _two_messages(h)
    status, text = await h.command("/summary")
    assert status == 200 and text == ""
    [call] = await h.fake.wait_for("response_url:summary")
    assert call.params["response_type"] == "ephemeral"
    assert "order 1234" in call.params["text"] and "Remembering 2 messages" in call.params["text"]
    assert h.llm.purposes == ["digest"]
    assert len(await h.turns()) == 2  # /summary stores nothing


async def test_summary_public_posts_to_channel(h: Harness) -> None:
    await _two_messages(h)
    await h.command("/summary", text="public")
    [call] = await h.fake.wait_for("response_url:summary")
    assert call.params["response_type"] == "in_channel"


async def test_summary_of_empty_channel(h: Harness) -> None:
    await h.command("/summary")
    [call] = await h.fake.wait_for("response_url:summary")
    assert "Nothing to summarize yet" in call.params["text"]
    assert h.llm.purposes == []


async def test_reset_refused_for_ordinary_member(h: Harness) -> None:
    await _two_messages(h)
    await h.command("/reset", user="U1")
    [call] = await h.fake.wait_for("response_url:reset")
    assert call.params["response_type"] == "ephemeral"
    assert "Only workspace admins and owners" in call.params["text"]
    await h.settle()
    assert len(await h.turns()) == 2


@pytest.mark.parametrize("user", ["U2", "U3"])
async def test_reset_allowed_for_admin_and_owner(h: Harness, user: str) -> None:
    await _two_messages(h)
    await h.command("/reset", user=user)
    [call] = await h.fake.wait_for("response_url:reset")
    assert call.params["text"] == "Done: I forgot 2 messages from this channel."
    assert await h.turns() == []
    assert [c.params["user"] for c in h.fake.calls_to("users.info")][-1] == user  # asked fresh


async def test_reset_allowed_for_configured_admin_id(h: Harness) -> None:
    await _two_messages(h)
    calls_before = len(h.fake.calls_to("users.info"))
    await h.command("/reset", user="UCONF")
    [call] = await h.fake.wait_for("response_url:reset")
    assert call.params["text"].startswith("Done: I forgot 2 messages")
    assert len(h.fake.calls_to("users.info")) == calls_before
    assert await h.turns() == []


# ---------------------------------------------------------------------- Socket Mode and run_slack


async def test_socket_mode_round_trip(tmp_path: Path, llm: FakeLLM) -> None:
    async with FakeSlack() as fake:
        directory(fake)
        env = environ(tmp_path, SLACK_APP_TOKEN=fake.app_token)
        del env["SLACK_SIGNING_SECRET"]
        settings = load_settings(environ=env, env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            stop = asyncio.Event()
            client = make_web_client(settings, base_url=fake.api_url)
            task = asyncio.create_task(run_slack(rt, client=client, stop=stop))
            try:
                await fake.socket_send({
                    "envelope_id": "env-1", "type": "events_api",
                    "accepts_response_payload": False, "retry_attempt": 0, "retry_reason": "",
                    "payload": event_body(mention()),
                })  # fmt: skip
                ack = await fake.wait_socket_ack("env-1")
                assert ack == {"envelope_id": "env-1"}
                update = (await fake.wait_for("chat.update"))[0].params
                assert update["text"] == "Hello from the model."
                assert fake.calls_to("chat.postMessage")[0].params["thread_ts"] == TS
                [opened] = fake.calls_to("apps.connections.open")
                assert opened.token == fake.app_token
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)
            assert [t.role for t in await rt.store.turns(KEY)] == ["user", "assistant"]
            assert rt.service.identity("slack")[0] == "UBOT"


async def test_run_slack_http_mode_serves_signed_events(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.slack_adapter")
    async with FakeSlack() as fake, aiohttp.ClientSession() as http:
        directory(fake)
        settings = load_settings(environ=environ(tmp_path, PORT="0"), env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            stop = asyncio.Event()
            client = make_web_client(settings, base_url=fake.api_url)
            task = asyncio.create_task(run_slack(rt, client=client, stop=stop))
            try:
                url = await listening_url(caplog, task)
                assert url.startswith("http://127.0.0.1:") and url.endswith("/slack/events")
                body = json.dumps(event_body(mention()))
                plain = {"Content-Type": "application/json"}
                async with http.post(url, data=body, headers=plain) as r:
                    assert r.status == 401  # unsigned
                async with http.post(url, data=body, headers=plain | sign(body)) as r:
                    assert r.status == 200
                await fake.wait_for("chat.update")
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)
            assert [t.role for t in await rt.store.turns(KEY)] == ["user", "assistant"]


async def listening_url(caplog: pytest.LogCaptureFixture, task: asyncio.Task[None]) -> str:
    """The URL run_slack logs once it listens (port 0 picks it), within five seconds."""
    async with asyncio.timeout(5):
        while True:
            for record in caplog.records:
                if m := re.search(r"listening on (\S+)", record.getMessage()):
                    return m.group(1)
            assert not task.done(), task
            await asyncio.sleep(0.01)


async def test_rejected_bot_token_is_a_config_error(tmp_path: Path, llm: FakeLLM) -> None:
    async with FakeSlack(bot_token="xoxb-the-real-one") as fake:
        settings = load_settings(environ=environ(tmp_path), env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            client = make_web_client(settings, base_url=fake.api_url)
            with pytest.raises(ConfigError, match="invalid_auth"):
                await asyncio.wait_for(run_slack(rt, client=client), 10)


# ---------------------------------------------------------------------- pure translation


def test_to_incoming_translates_and_filters() -> None:
    names = {"U1": "Alice", "UBOT": "gistbot"}
    msg = to_incoming(TEAM, mention(), bot_user_id="UBOT", names=names)
    assert msg is not None
    assert (msg.key, msg.message_id, msg.author_name) == (KEY, TS, "Alice")
    assert msg.mentions_bot and not msg.is_direct and msg.sent_at == float(TS)
    dm = to_incoming(
        TEAM, mention("hi", kind="message", channel="D7"), bot_user_id="UBOT", names=names
    )
    assert dm is not None and dm.is_direct and not dm.mentions_bot
    for event in (
        mention(user="UBOT"),
        mention(bot_id="B1"),
        mention(subtype="channel_join"),
        mention(text="   "),
    ):
        assert to_incoming(TEAM, event, bot_user_id="UBOT", names=names) is None


def test_manifest_declares_what_the_adapter_uses() -> None:
    manifest = (Path(__file__).parent.parent / "slack_manifest.yaml").read_text()
    lines = {line.split("#")[0].strip() for line in manifest.splitlines()}
    for needed in (
        "- command: /summary",
        "- command: /reset",
        "- command: /remember",
        "- command: /memory",
        "- command: /forget",
        "socket_mode_enabled: true",
        "- app_mention",
        "- message.channels",
        "- message.groups",
        "- message.im",
        "- message.mpim",
        "- chat:write",
        "- commands",
        "- users:read",
        "- app_mentions:read",
        "- channels:history",
        "- groups:history",
        "- im:history",
        "- mpim:history",
        "messages_tab_enabled: true",
    ):
        assert needed in lines, needed


async def test_remember_memory_forget_commands(h: Harness) -> None:
    await h.command("/remember", user="U1", text="the standup moves to 9:30")
    [call] = await h.fake.wait_for("response_url:remember")
    assert call.params["response_type"] == "ephemeral"
    assert call.params["text"].startswith("Remembered as fact #")
    [fact] = await h.rt.memory.facts(KEY)
    assert (fact.text, fact.author, fact.pinned) == ("the standup moves to 9:30", "Alice", True)

    await h.command("/memory", user="U1")
    [listing] = await h.fake.wait_for("response_url:memory")
    assert listing.params["response_type"] == "ephemeral"
    assert f"#{fact.id}" in listing.params["text"] and "standup" in listing.params["text"]

    await h.command("/forget", user="U1", text=str(fact.id))
    [refused] = await h.fake.wait_for("response_url:forget")
    assert refused.params["response_type"] == "ephemeral"
    assert "Only workspace admins and owners" in refused.params["text"]
    await h.settle()
    assert len(await h.rt.memory.facts(KEY)) == 1

    await h.command("/forget", user="U2", text="standup")
    calls = await h.fake.wait_for("response_url:forget", 2)
    assert calls[1].params["text"] == f"Forgot fact #{fact.id}: the standup moves to 9:30"
    assert await h.rt.memory.facts(KEY) == []
