"""The fault matrix's rows: every outgoing platform call the bot makes, with how to make it
happen and what a person must see afterwards.

A ``Row`` names one call on one platform (the fake's endpoint and how many normal calls of
it come first) and a ``Scene``: what the test does to make that call happen (a mention, a
long answer, a refused one, a digest's slot) and what must then stand in the channel. The
matrix (``tests/test_fault_matrix.py``) runs every row under every fault of
``tests.fakes.faults`` with the real slack-bolt/slack_sdk and discord.py clients against the
loopback fakes, and counts what is visible: exactly one answer per acknowledged mention, no
placeholder left, each digest once, no reply left owed. A new surface joins by adding a
row here (and its scene, if it is a new way to make a call happen), not a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.discord.client import GistbotClient
from adapters.discord.text import MAX_MESSAGES, MESSAGE_LIMIT, plan_reply
from adapters.slack.assistant import GREETING
from adapters.slack.text import format_reply
from bot.app import Runtime
from bot.stores.digests import DigestSchedule
from bot.stores.usage import UsageKey
from memory.models import ChannelKey
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.faults import Fault
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import Answer, faulty
from tests.harness.assistant import DM, asked, started
from tests.harness.discord import GENERAL, W, has_turns, make_settings, mention, running
from tests.harness.slack import KEY, Harness, open_harness
from tests.harness.slack import mention as slack_mention

__all__ = ["ANSWER", "CONTAINING", "LONG", "POST_TIMEOUT", "ROWS", "Row", "Seen", "run_row"]

POST_TIMEOUT = 0.5  # seconds a platform call may take in the matrix (a hang ends there)
ANSWER = "The deploy window is 14:00-15:00 UTC."
LONG = "\n\n".join(f"Part {i}: " + "the rollout plan in detail " * 90 for i in range(3))


@dataclass
class Seen:
    """What a person sees after the scene, and what the scene expected."""

    texts: list[str]  # the bot's messages in the channel as they stand now
    expected: list[str]  # exactly these (for a ``CONTAINING`` scene: one message with it)
    owed: int = 0  # replies still owed in the database
    whispers: int = 0  # private notices (Slack ephemeral)


CONTAINING = frozenset({"digest", "public catch-up"})  # one message, its text made elsewhere


@dataclass(frozen=True)
class Row:
    """One outgoing call: on ``platform``, ``surface`` (what it is for a person), made by
    ``scene``, the ``before``+1-th call of the fake's ``endpoint``."""

    platform: str
    surface: str
    endpoint: str
    scene: str
    before: int = 0
    env: tuple[tuple[str, str], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.platform}-{self.surface.replace(' ', '-')}"


POST, PATCH = "POST /channels/{id}/messages", "PATCH /channels/{id}/messages/{id}"
ORIGINAL = "PATCH /webhooks/{id}/{token}/messages/@original"  # a command's own response
STREAMED = (("STREAM_REPLIES", "true"),)
ROWS = (
    Row("slack", "placeholder post", "chat.postMessage", "reply"),
    Row("slack", "reply into placeholder", "chat.update", "reply"),
    Row("slack", "chunk post", "chat.postMessage", "long reply", before=1),
    Row("slack", "placeholder delete", "chat.delete", "refused",
        env=(("DAILY_TOKENS_PER_USER", "100"),)),
    Row("slack", "digest post", "chat.postMessage", "digest"),
    Row("slack", "public catch-up", "response_url:catchup", "public catch-up"),
    Row("slack", "assistant answer post", "chat.postMessage", "assistant", before=1),
    Row("discord", "reply post", POST, "reply"),
    Row("discord", "chunk post", POST, "long reply", before=1),
    Row("discord", "streamed first post", POST, "reply", env=STREAMED),
    Row("discord", "streamed edit", PATCH, "reply", env=STREAMED),
    Row("discord", "digest post", POST, "digest"),
    Row("discord", "public catch-up", ORIGINAL, "public catch-up"),
)


def owed(db: Path) -> int:
    """Replies still owed in the database at ``db``."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM owed_replies").fetchone()[0])


async def run_row(row: Row, fault: Fault, tmp_path: Path, *, discord_fake: FakeDiscord,
                  discord_llm: FakeOpenAI) -> Seen:
    """Run ``row``'s scene with ``fault`` on its call; what was seen (the loopback model
    answers on both platforms; the loopback Discord is used by Discord's rows)."""
    runner = _slack if row.platform == "slack" else _discord
    return await runner(row, fault, tmp_path, discord_fake=discord_fake,
                        discord_llm=discord_llm)


# ---------------------------------------------------------------------------- Slack


async def _slack_reply(h: Harness, model: FakeOpenAI) -> list[str]:
    assert await h.event(slack_mention("<@UBOT> when is the deploy window?")) == 200
    await h.settle()
    return [ANSWER]


async def _slack_long(h: Harness, model: FakeOpenAI) -> list[str]:
    model.responder = lambda body: LONG
    assert await h.event(slack_mention("<@UBOT> the whole plan, please")) == 200
    await h.settle()
    return format_reply(LONG, {})


async def _slack_refused(h: Harness, model: FakeOpenAI) -> list[str]:
    day, person = h.rt.features.quota.day(), UsageKey("slack", KEY.workspace, "U1")
    await h.rt.storage.usage.add_tokens(day, [person], 500)  # over DAILY_TOKENS_PER_USER
    assert await h.event(slack_mention("<@UBOT> an expensive question")) == 200
    await h.settle()
    return []  # over the daily limit: a private notice, and "thinking…" taken away


async def _slack_conversation(h: Harness) -> float:
    """Two messages a minute ago (nobody mentions the bot); now."""
    now = time.time()
    for i, text in enumerate(("release v2.4.0 is tagged", "rollback plan RB-7 ready")):
        event = slack_mention(text, kind="message", ts=f"{now - 60 + i:.6f}", user=f"U{i + 1}")
        assert await h.event(event, event_id=f"E{i}") == 200
    await h.settle()
    return now


async def _slack_digest(h: Harness, model: FakeOpenAI) -> list[str]:
    now = await _slack_conversation(h)
    model.responder = lambda body: "- Release v2.4.0 [1]"
    await _tick(h.rt, KEY, now)
    return ["Daily digest"]


async def _slack_public(h: Harness, model: FakeOpenAI) -> list[str]:
    await _slack_conversation(h)
    model.responder = lambda body: "- Release v2.4.0 is tagged [1]"
    status, _ = await h.command("/catchup", user="U2", text="1d public")
    assert status == 200
    await h.settle()
    return ["Release v2.4.0 is tagged"]


async def _slack_assistant(h: Harness, model: FakeOpenAI) -> list[str]:
    assert await h.event(started(), event_id="EvStart") == 200  # the greeting: no fault
    assert await h.event(asked("when is the deploy window?", "1729999400.000100")) == 200
    await h.settle()
    return [GREETING, ANSWER]  # the thread's status instead of a placeholder


SLACK_SCENES: dict[str, Callable[[Harness, FakeOpenAI], Awaitable[list[str]]]] = {
    "reply": _slack_reply, "long reply": _slack_long, "refused": _slack_refused,
    "digest": _slack_digest, "public catch-up": _slack_public, "assistant": _slack_assistant,
}


async def _slack(row: Row, fault: Fault, tmp_path: Path, *, discord_llm: FakeOpenAI,
                 **_: Any) -> Seen:
    model = discord_llm
    model.responder = lambda body: ANSWER
    env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-test",
           "LLM_MAX_RETRIES": "0", **dict(row.env)}
    async with open_harness(tmp_path, None, env, post_timeout=POST_TIMEOUT) as h:
        h.fake.script(row.endpoint, *[Answer()] * row.before, faulty(fault))
        expected = await SLACK_SCENES[row.scene](h, model)
        channel = DM if row.scene == "assistant" else KEY.channel
        texts = [str(m.get("text")) for m in h.fake.bot_messages(channel)]
        whispers = len(h.fake.calls_to("chat.postEphemeral"))
    return Seen(texts, expected, owed(tmp_path / "gistbot.db"), whispers)


# ---------------------------------------------------------------------------- Discord


async def _tick(rt: Runtime, key: ChannelKey, now: float) -> None:
    """A daily digest slot two minutes ahead, and the scheduler's tick after it: posted."""
    minute = int((now % 86400) // 60 + 2) % 1440
    await rt.storage.digests.set_digest_schedule(
        DigestSchedule(key, "daily", -1, minute, "UTC", now - 3 * 86400))
    digests = rt.features.catchup_commands.digests
    assert digests is not None
    digests.clock = lambda: now + 181
    assert await digests.tick() == 1


@dataclass
class _Discord:
    rt: Runtime
    fake: FakeDiscord
    llm: FakeOpenAI
    delivered: asyncio.Event
    client: GistbotClient


async def _discord_reply(d: _Discord) -> list[str]:
    d.llm.responder = lambda body: ANSWER
    await d.fake.send_message(W.general, W.alice, mention("when is the deploy window?"),
                              mentions=[W.bot_user])
    await asyncio.wait_for(d.delivered.wait(), 30)
    return [ANSWER]


async def _discord_long(d: _Discord) -> list[str]:
    d.llm.responder = lambda body: LONG
    await d.fake.send_message(W.general, W.alice, mention("the whole plan, please"),
                              mentions=[W.bot_user])
    await asyncio.wait_for(d.delivered.wait(), 30)
    return list(plan_reply(LONG, limit=MESSAGE_LIMIT, max_messages=MAX_MESSAGES).messages)


async def _discord_conversation(d: _Discord) -> None:
    """Two messages nobody mentions the bot in, stored."""
    await d.fake.send_message(W.general, W.alice, "deploy window is 14:00-15:00 UTC")
    await d.fake.send_message(W.general, W.bob, "rollback plan RB-7 ready")
    deadline = time.monotonic() + 10
    while not await has_turns(d.rt, 2):
        assert time.monotonic() < deadline, "the messages were not stored"
        await asyncio.sleep(0.01)


async def _discord_digest(d: _Discord) -> list[str]:
    now = time.time()
    await _discord_conversation(d)
    d.llm.responder = lambda body: "- The deploy window [1]"
    await _tick(d.rt, GENERAL, now)
    return ["Daily digest"]


async def _discord_public(d: _Discord) -> list[str]:
    """``/catchup public``, waited for until discord.py says the command completed."""
    await _discord_conversation(d)
    d.llm.responder = lambda body: "- The deploy window is set [1]"
    done = asyncio.ensure_future(d.client.wait_for("app_command_completion"))
    await d.fake.interaction("catchup", invoker=W.carol, channel_id=W.general,
                             options={"since": "1d", "public": True})
    await asyncio.wait_for(done, 30)
    return ["The deploy window is set"]


DISCORD_SCENES: dict[str, Callable[[_Discord], Awaitable[list[str]]]] = {
    "reply": _discord_reply, "long reply": _discord_long, "digest": _discord_digest,
    "public catch-up": _discord_public,
}


@contextlib.asynccontextmanager
async def _discord_running(row: Row, tmp_path: Path,
                           llm: FakeOpenAI
                           ) -> AsyncIterator[tuple[Runtime, asyncio.Event, GistbotClient]]:
    settings = make_settings(tmp_path, llm, **dict(row.env))
    chat = settings.chat.model_copy(update={"post_timeout": POST_TIMEOUT,
                                            "stream_interval": 0.05})
    async with running(settings.model_copy(update={"chat": chat})) as (rt, client, _):
        delivered = asyncio.Event()
        deliver = client.flow.deliver

        async def counted(*args: Any, **kwargs: Any) -> bool:
            try:
                return await deliver(*args, **kwargs)
            finally:
                delivered.set()

        client.flow.deliver = counted  # type: ignore[method-assign]
        yield rt, delivered, client


async def _discord(row: Row, fault: Fault, tmp_path: Path, *, discord_fake: FakeDiscord,
                   discord_llm: FakeOpenAI, **_: Any) -> Seen:
    fake = discord_fake
    async with _discord_running(row, tmp_path, discord_llm) as (rt, delivered, client):
        fake.script(row.endpoint, *[None] * row.before, fault)
        expected = await DISCORD_SCENES[row.scene](
            _Discord(rt, fake, discord_llm, delivered, client))
        texts = [str(m["content"]) for m in fake.visible(W.general)
                 if m["author"]["id"] == W.bot_user["id"]]
    return Seen(texts, expected, owed(tmp_path / "gistbot.db"))
