"""The bad-input corpus (``tests/data/bad_inputs.json``) through Discord and Slack translation,
the service and the store, and end to end through both platform fakes.

Each case names its expected outcome — ignored, stored, answered or refused — and every case
also checks the invariants: no exception escapes, a message is stored exactly once (a
re-delivery adds nothing), and nothing the bot sends can ping anyone (Discord: every send
carries ``allowed_mentions`` that parse nothing; Slack: no live ``<!here>``/``<@U…>``/bare
``@channel`` survives ``format_reply``).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import discord
import pytest

from adapters.discord.text import plan_reply
from adapters.discord.text import to_incoming as discord_incoming
from adapters.slack.text import format_reply
from adapters.slack.text import to_incoming as slack_incoming
from bot.app import Runtime
from bot.conversation.service import TOO_LONG, cut
from bot.messages import IncomingMessage
from bot.settings import load_settings
from memory.models import ChannelKey
from memory.text import clean_text
from tests.fakes.discord_server import FakeDiscord, message
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.chat import ask
from tests.harness.checks import assert_no_slack_ping
from tests.harness.discord import (
    GENERAL,
    Objects,
    W,
    followup_to,
    has_turns,
    make_settings,
    running,
)
from tests.harness.slack import (
    TEAM,
    FakeLLM,
    Harness,
)

CORPUS = json.loads((Path(__file__).parent / "data" / "bad_inputs.json").read_text())["cases"]
LIMIT = 40_000  # MAX_INPUT_CHARS's default
NAMES = {"U1": "Alice", "U2": "Bob", "UBOT": "gistbot"}
DISCORD_TOKENS = {
    "{BOT}": f"<@{W.bot_id}>", "{BOB}": f"<@{W.bob['id']}>", "{GROUP}": f"<@&{W.mod_role}>",
    "{CHANNEL}": "@channel", "{UNKNOWN_USER}": "<@999999999999999999>",
    "{UNKNOWN_CHANNEL}": "<#999999999999999999>",
}  # fmt: skip
SLACK_TOKENS = {
    "{BOT}": "<@UBOT>", "{BOB}": "<@U2>", "{GROUP}": "<!subteam^S1|@devs>",
    "{CHANNEL}": "<!channel>", "{UNKNOWN_USER}": "<@U999>", "{UNKNOWN_CHANNEL}": "<#C999>",
}  # fmt: skip


def cases(*kinds: str) -> list[Any]:
    return [pytest.param(c, id=c["id"]) for c in CORPUS if c["kind"] in kinds]


def text_of(spec: str | dict[str, Any]) -> str:
    if isinstance(spec, str):
        return spec
    return str(spec.get("prefix", "")) + str(spec["repeat"]) * int(spec["times"])


def encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def discord_text(case: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The Discord message content and payload extras (mention lists) for a case."""
    text = text_of(case["text"])
    extra: dict[str, Any] = {"mentions": [], "mention_roles": []}
    if "{BOT}" in text:
        extra["mentions"].append(W.bot_user)
    if "{BOB}" in text:
        extra["mentions"].append(W.bob)
    if "{GROUP}" in text:
        extra["mention_roles"].append(W.mod_role)
    for token, value in DISCORD_TOKENS.items():
        text = text.replace(token, value)
    return text, extra


def slack_text(case: dict[str, Any]) -> str:
    """What Slack sends for the case: typed ``&<>`` escaped, mentions as control sequences."""
    text = text_of(case["text"])
    if not case.get("slack_raw"):
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for token, value in SLACK_TOKENS.items():
        text = text.replace(token, value)
    return text


def test_corpus_has_at_least_60_cases_each_with_an_outcome() -> None:
    assert len(CORPUS) >= 60
    assert len({c["id"] for c in CORPUS}) == len(CORPUS)
    assert all(c["expect"] in ("ignored", "stored", "answered", "refused") for c in CORPUS)
    kinds = Counter(c["kind"] for c in CORPUS)
    assert kinds["message"] >= 40 and all(kinds[k] for k in (
        "model_output", "slack_command", "discord_command", "edit", "delete", "slack_event"))


# ---------------------------------------------------------------------- translation + service


@pytest.fixture
async def rt(tmp_path: Path, llm: FakeLLM) -> Any:
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path / 'bad.db'}"}, env_file=None)
    async with Runtime.open(settings, llm=llm) as runtime:
        yield runtime


def translate(case: dict[str, Any], objects: Objects) -> list[IncomingMessage | None]:
    content, extra = discord_text(case)
    d = discord_incoming(objects.message(W.general, W.alice, content, **extra), W.bot_id)
    event = {"type": "message", "user": "U1", "text": slack_text(case),
             "ts": "1700000000.000100", "channel": "C1", "channel_type": "channel"}
    s = slack_incoming(TEAM, event, bot_user_id="UBOT", names=NAMES)
    return [d, s]


@pytest.mark.parametrize("case", cases("message"))
async def test_message_case(case: dict[str, Any], objects: Objects, rt: Runtime,
                            llm: FakeLLM) -> None:
    expect = case["expect"]
    translated = translate(case, objects)
    if expect == "ignored":
        assert translated == [None, None]
        return
    for incoming in translated:
        assert incoming is not None
        incoming = dataclasses.replace(incoming, mentions_bot=case["mention"])
        calls = llm.reply_calls
        if expect == "answered":
            llm.replies.append(incoming.text[:5000])  # the model repeats the hostile text
        reply = await ask(rt, incoming)
        if expect == "stored":
            assert reply is None
        elif expect == "refused":
            assert reply is not None and reply.failed and llm.reply_calls == calls
            assert reply.text == TOO_LONG.format(length=len(incoming.text), limit=LIMIT)
        else:
            assert reply is not None and not reply.failed and llm.reply_calls == calls + 1
        if reply is not None:
            assert_no_slack_ping(format_reply(reply.text, NAMES))
            plan = plan_reply(reply.text)
            assert all(len(m) <= 2000 for m in plan.messages) and len(plan.messages) <= 4
        assert await ask(rt, incoming) is None  # a re-delivery adds nothing
        stored = await rt.store.turns(incoming.key)
        mine = [t for t in stored if t.message_id == incoming.message_id]
        assert len(mine) == 1
        assert mine[0].text == clean_text(cut(incoming.text, LIMIT))
        if case.get("cut"):
            assert mine[0].text.endswith("more characters not kept]")
            assert len(mine[0].text) < LIMIT + 80
        for needle in case.get("stored_contains", ()):
            assert needle in mine[0].text
        roles = [t.role for t in stored]
        assert roles == (["user", "assistant"] if expect == "answered" else ["user"])


@pytest.mark.parametrize("case", cases("model_output"))
async def test_model_output_case(case: dict[str, Any], rt: Runtime, llm: FakeLLM) -> None:
    llm.replies.append(case["text"])
    key = ChannelKey("slack", TEAM, "C1")
    reply = await ask(
        rt, IncomingMessage(key, "1.0", "U1", "Alice", "@gistbot say it", 1.0, mentions_bot=True))
    assert reply is not None and reply.text == case["text"]
    assert_no_slack_ping(format_reply(reply.text, NAMES))
    assert [t.role for t in await rt.store.turns(key)] == ["user", "assistant"]


def platform_cases(platform: str) -> list[Any]:
    return [c for c in cases("edit", "delete") if c.values[0]["platform"] == platform]


@pytest.mark.parametrize("case", platform_cases("service"))
async def test_edit_and_delete_case_at_the_service(case: dict[str, Any], rt: Runtime) -> None:
    key = ChannelKey("test", "w", "c1")
    await ask(rt, IncomingMessage(key, "m1", "u1", "Ann", "original", 1.0))
    before = await rt.store.turns(key)
    target = ChannelKey("test", "w", case.get("channel", "c1"))
    if case["kind"] == "edit":
        await rt.service.edited(target, case["message_id"], text_of(case.get("text", "new")))
    else:
        await rt.service.deleted(target, case["message_id"])
    after = await rt.store.turns(key)
    if case["expect"] == "ignored":
        assert after == before
    else:
        (turn,) = after
        assert turn.text == cut(text_of(case["text"]), LIMIT) and len(turn.text) < LIMIT + 80
    assert await rt.store.turns(ChannelKey("test", "w", "c-nowhere")) == []


# ---------------------------------------------------------------------- Slack


class Responder:
    """Stands in for bolt's ``respond``: keeps what the adapter said."""

    def __init__(self) -> None:
        self.said: list[dict[str, Any]] = []

    async def __call__(self, **kwargs: Any) -> Any:
        self.said.append(kwargs)
        return type("R", (), {"status_code": 200, "body": "ok"})()


async def _seed(h: Harness) -> None:
    assert await h.event({"type": "message", "user": "U1", "text": "seed", "ts": "1.000001",
                          "channel": "C1", "channel_type": "channel"}, event_id="EvSeed") == 200
    await h.settle()


@pytest.mark.parametrize("case", cases("slack_command"))
async def test_slack_command_case(case: dict[str, Any], h: Harness) -> None:
    await _seed(h)
    respond = Responder()
    adapter = h.adapter
    name = "/summary" if case["command"] == "/summary" else "/reset"
    await adapter.commands.handle(name, case["payload"], respond)  # type: ignore[arg-type]
    (said,) = respond.said
    assert case["expect_text"] in said["text"]
    assert said["response_type"] == "ephemeral" or case["expect"] == "answered"
    assert_no_slack_ping([said["text"]])
    assert [t.text for t in await h.turns()] == ["seed"]  # nothing reset, nothing added
    assert h.llm.reply_calls == 0


@pytest.mark.parametrize("case", cases("slack_event"))
async def test_slack_event_case(case: dict[str, Any], h: Harness) -> None:
    await _seed(h)
    await h.adapter.events.receive(case["body"], h.adapter.spawn)  # never raises
    await h.settle()
    new = [t for t in await h.turns() if t.text != "seed"]
    if case["expect"] == "ignored":
        assert new == []
    else:
        (turn,) = new
        assert turn.role == "user"
    assert h.fake.calls_to("chat.postMessage") == []


@pytest.mark.parametrize("case", platform_cases("slack"))
async def test_slack_edit_delete_case(case: dict[str, Any], h: Harness) -> None:
    await _seed(h)
    ts = case["message_id"]
    if case["kind"] == "edit":
        event = {"type": "message", "subtype": "message_changed", "channel": "C1",
                 "ts": "1.000900", "message": {"type": "message", "user": "U1", "text": "new",
                                               "ts": ts},
                 "previous_message": {"type": "message", "user": "U1", "text": "old", "ts": ts}}
    else:
        event = {"type": "message", "subtype": "message_deleted", "channel": "C1",
                 "ts": "1.000901", "deleted_ts": ts}
    assert await h.event(event, event_id="EvEdit") == 200
    await h.settle()
    assert [t.text for t in await h.turns()] == ["seed"]


@pytest.mark.parametrize("env_extra", [{"USER_RATE_LIMIT": "0"}])
async def test_every_message_case_end_to_end_through_slack(h: Harness) -> None:
    """All message cases as signed events over HTTP, concurrently; then the invariants:
    each acknowledged one stored once, each addressed one answered once, no ping sent."""
    h.llm.replies.extend(c["text"] for c in CORPUS if c["kind"] == "model_output")
    sent: dict[str, dict[str, Any]] = {}
    for i, case in enumerate(c for c in CORPUS if c["kind"] == "message"):
        ts = f"1700000100.{i:06d}"
        text = slack_text(case)
        if case["mention"] and case["expect"] != "ignored" and "<@UBOT>" not in text:
            text = f"<@UBOT> {text}"
        event = {"type": "message", "user": "U1" if i % 2 else "U2", "text": text, "ts": ts,
                 "channel": "C1", "channel_type": "channel"}
        status = await h.event(event, event_id=f"Ev{i}")
        if len(text) > 1024 * 1024:
            # Slack caps a message at 40,000 characters; an HTTP body over aiohttp's 1 MiB
            # is refused before it is acknowledged (Socket Mode has no such limit).
            assert status == 413, case["id"]
            continue
        assert status == 200, case["id"]
        sent[ts] = case
    await h.settle()
    stored = Counter(t.message_id for t in await h.turns() if t.role == "user")
    for ts, case in sent.items():
        assert stored[ts] == (0 if case["expect"] == "ignored" else 1), case["id"]
    replies = [t for t in await h.turns() if t.role == "assistant"]
    answered = sum(c["expect"] == "answered" for c in sent.values())
    assert len(replies) == answered
    out = [c.params["text"] for c in h.fake.calls if c.method in ("chat.postMessage",
                                                                   "chat.update")]
    assert_no_slack_ping(out)


# ---------------------------------------------------------------------- Discord


async def test_every_case_end_to_end_through_discord(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    """Message cases, model outputs, commands, edits and deletes through a real discord.py
    client; every send must carry allowed_mentions that parse nothing."""
    # Discord's gateway JSON is valid UTF-8: it cannot carry a lone surrogate (discord.py's
    # orjson would reject the frame). Those cases run through to_incoming above.
    messages = [c for c in CORPUS if c["kind"] == "message" and encodable(text_of(c["text"]))]
    assert len(messages) >= 40
    settings = make_settings(tmp_path, discord_llm, USER_RATE_LIMIT="0")  # one busy author
    async with running(settings) as (rt, _, watch):
        sent: dict[str, dict[str, Any]] = {}
        for case in messages:
            content, extra = discord_text(case)
            if case["mention"] and case["expect"] != "ignored" and "{BOT}" not in case["text"]:
                content = f"<@{W.bot_id}> {content}"
                extra["mentions"].append(W.bot_user)
            data = await discord_fake.send_message(W.general, W.alice, content, **extra)
            sent[data["id"]] = case
        keep = sum(c["expect"] != "ignored" for c in messages)
        answered = sum(c["expect"] in ("answered", "refused") for c in messages)
        await discord_fake.wait_for(lambda f: len(f.sent_to(W.general)) >= answered)
        await watch.until(lambda: has_turns(rt, keep + sum(c["expect"] == "answered"
                                                        for c in messages)))
        stored = Counter(t.message_id for t in await rt.store.turns(GENERAL, limit=10_000)
                         if t.role == "user")
        for message_id, case in sent.items():
            assert stored[message_id] == (0 if case["expect"] == "ignored" else 1), case["id"]

        for case in (c for c in CORPUS if c["kind"] == "model_output"):
            discord_llm.push(case["text"])
            n = len(discord_fake.sent_to(W.general))
            await discord_fake.send_message(W.general, W.bob, f"<@{W.bot_id}> say it",
                                            mentions=[W.bot_user])
            await discord_fake.wait_for(lambda f, n=n: len(f.sent_to(W.general)) > n)

        for case in (c for c in CORPUS if c["kind"] == "discord_command"):
            channel = {"dm": W.dm_channel, "general": W.general,
                       "unknown": 200_000_000_000_000_999}[case["where"]]
            inter = await discord_fake.interaction(case["command"], invoker=W.alice,
                                                   channel_id=channel, permissions=0,
                                                   options=case["options"])
            answer = await followup_to(discord_fake, inter)
            assert case["expect_text"] in answer.json["content"], case["id"]
            assert answer.json["allowed_mentions"]["parse"] == []

        before = await rt.store.turns(GENERAL, limit=10_000)
        ghost = message(W, W.general, W.alice, "never delivered")
        for case in (c for c in CORPUS if c["kind"] in ("edit", "delete")
                     and c["platform"] == "discord"):
            if case["kind"] == "edit":
                await discord_fake.edit_message(ghost, "edited ghost")
            else:
                await discord_fake.delete_message(ghost)
        await discord_fake.send_message(W.general, W.bob, "sentinel after the ghosts")
        await watch.until(lambda: has_turns(rt, len(before) + 1))
        after = await rt.store.turns(GENERAL, limit=10_000)
        assert after[:-1] == before and after[-1].text == "sentinel after the ghosts"

    posts = [r for r in discord_fake.requests if r.method in ("POST", "PATCH")
             and ("/messages" in r.path or r.path.startswith("/webhooks/"))]
    assert posts
    for r in posts:
        allowed = r.json["allowed_mentions"]
        assert allowed.get("parse") == [] and not allowed.get("users") and not allowed.get(
            "roles") and not allowed.get("replied_user"), r.json
    assert isinstance(discord.AllowedMentions.none().to_dict(), dict)
