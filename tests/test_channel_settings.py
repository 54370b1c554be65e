"""Channel settings in force, end to end through a real ``Runtime`` (SQLite file, the
loopback OpenAI endpoint): a channel's persona and model reach the request, a model off the
allowlist is refused with the list, ``record off`` stores nothing (checked in the database)
and ``/summary`` says so, ``record addressed``, ``reply_mode`` off and all, the summary's
language and model, daily quotas (refused, told once privately, still remembered, reset at
00:00 UTC), ``/config usage`` and ``history``; and on PostgreSQL, a change made through one
replica honoured by the other within 5 s."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import Runtime
from bot.channels.config import answers
from bot.channels.config_command import Caller, ConfigRequest
from bot.conversation.prompts import FENCE_OPEN
from bot.memory_commands.feature import RECORD_OFF
from bot.messages import IncomingMessage
from bot.stores.usage import UsageKey
from memory.models import ChannelKey
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.harness.chat import ask
from tests.harness.postgres import fresh_schema
from tests.harness.service import KEY, bodies, msg, runtime

OTHER = ChannelKey("test", "w1", "c2")
ADMIN = Caller("op", "Operator", may_channel=True, may_server=True)
ENV = {"ALLOWED_MODELS": "gpt-test,gpt-big,gpt-test-mini"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(responder=default_responder) as server:
        yield server


def setting(action: str, key: str = "", value: str = "", *, server: bool = False
            ) -> ConfigRequest:
    return ConfigRequest(action, key, value, server)


async def answered(rt: Runtime, m: IncomingMessage) -> bool:
    """Whether ``m`` gets a reply by its channel's settings (what ``receive`` decides by),
    asked without recording it."""
    return answers(m, await rt.features.channels.get(m.key))


def reply_bodies(fake: FakeOpenAI) -> list[dict[str, object]]:
    return bodies(fake, summary=False)


async def test_a_channels_persona_and_model_reach_the_request(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, **ENV) as rt:
        done = await rt.features.config_command.configure(KEY, setting("set", "model",
                                                                       "gpt-big"), ADMIN)
        assert done.ok, done.text
        await rt.features.config_command.configure(KEY, setting("set", "persona",
                                                                "You are a terse pirate."),
                                   ADMIN)
        await ask(rt, msg(1, "hello", mention=True))
        await ask(rt, msg(2, "hello", mention=True, key=OTHER))
        here, there = reply_bodies(fake)
        assert here["model"] == "gpt-big" and there["model"] == "gpt-test"
        system = here["messages"][0]["content"]  # type: ignore[index]
        assert system.startswith("You are a terse pirate.")
        assert system.index("terse pirate") < system.index(FENCE_OPEN)
        assert "terse pirate" not in there["messages"][0]["content"]  # type: ignore[index]


async def test_a_model_off_the_allowlist_is_refused_with_the_list(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, **ENV) as rt:
        answer = await rt.features.config_command.configure(KEY, setting("set", "model",
                                                                         "gpt-5-pro"), ADMIN)
        assert not answer.ok
        assert "gpt-5-pro" in answer.text
        assert "gpt-test, gpt-big, gpt-test-mini" in answer.text
        assert await rt.storage.settings.scope_settings(KEY) == []
        await ask(rt, msg(1, "hi", mention=True))
        assert reply_bodies(fake)[0]["model"] == "gpt-test"


async def test_record_off_stores_nothing_and_summary_says_so(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake) as rt:
        await rt.features.config_command.configure(KEY, setting("set", "record", "off"), ADMIN)
        await ask(rt, msg(1, "my card number is 4111 1111 1111 1111"))
        reply = await ask(rt, msg(2, "what did I just say?", mention=True))
        assert reply is not None and not reply.failed  # answered from the message alone
        [body] = reply_bodies(fake)
        users = [m for m in body["messages"] if m["role"] == "user"]  # type: ignore[union-attr]
        assert [m["content"] for m in users] == ["[Alice]: what did I just say?"]
        assert await rt.store.turns(KEY) == []  # nothing of the channel in the database
        assert KEY not in await rt.store.channels()
        summary = await rt.features.memory_commands.summary(KEY)
        assert RECORD_OFF in summary.text

        await rt.features.config_command.configure(KEY, setting("unset", "record"), ADMIN)
        await ask(rt, msg(3, "now it is on"))
        await rt.features.config_command.configure(KEY, setting("set", "record", "off"), ADMIN)
        summary = await rt.features.memory_commands.summary(KEY)
        assert RECORD_OFF in summary.text and "before it was turned off" in summary.text
        assert [t.message_id for t in await rt.store.turns(KEY)] == ["m3"]


async def test_record_addressed_keeps_only_messages_to_the_bot_and_its_replies(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake) as rt:
        await rt.features.config_command.configure(KEY, setting("set", "record", "addressed"),
                                                   ADMIN)
        await ask(rt, msg(1, "chatter between people"))
        await ask(rt, msg(2, "gistbot, what's up?", mention=True))
        assert [t.message_id for t in await rt.store.turns(KEY)] == ["m2", "reply:m2"]


async def test_reply_mode_off_remembers_only_and_all_answers_everything(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake) as rt:
        await rt.features.config_command.configure(KEY, setting("set", "reply_mode", "off"), ADMIN)
        assert await ask(rt, msg(1, "are you there?", mention=True)) is None
        assert [t.message_id for t in await rt.store.turns(KEY)] == ["m1"]
        assert reply_bodies(fake) == []
        await rt.features.config_command.configure(KEY, setting("set", "reply_mode", "all",
                                                                server=True), ADMIN)
        await rt.features.config_command.configure(KEY, setting("unset", "reply_mode"), ADMIN)
        assert await answered(rt, msg(2, "no mention", key=OTHER))  # server-wide
        reply = await ask(rt, msg(2, "nobody mentioned you"))
        assert reply is not None and "nobody mentioned you" in reply.text


async def test_always_reply_channels_is_the_env_default_of_reply_mode(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, ALWAYS_REPLY_CHANNELS="c1") as rt:
        assert await answered(rt, msg(1, "plain"))
        assert not await answered(rt, msg(2, "plain", key=OTHER))
        shown = await rt.features.config_command.configure(KEY, setting("show"), ADMIN)
        assert "reply_mode: all  (default)" in shown.text
        await rt.features.config_command.configure(KEY, setting("set", "reply_mode", "mentions"),
                                                   ADMIN)
        assert not await answered(rt, msg(3, "plain"))


async def test_summary_language_and_model_and_their_tokens_count_for_the_server(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, **ENV) as rt:
        await rt.features.config_command.configure(KEY, setting("set", "language", "Korean",
                                                                server=True), ADMIN)
        await rt.features.config_command.configure(KEY, setting("set", "summary_model",
                                                                "gpt-big"), ADMIN)
        await ask(rt, msg(1, "the launch is on Friday, ticket OPS-42"))
        await rt.features.memory_commands.summary(KEY)
        [digest] = bodies(fake, summary=True)
        assert digest["model"] == "gpt-big"
        assert "write the summary in Korean" in str(digest["messages"])
        server = UsageKey("test", "w1")
        assert sum((await rt.features.quota.usage(KEY, "alice"))[server].values()) > 0  # in memory
        await rt.features.quota.flush()  # written within FLUSH_EVERY; here at once
        assert (await rt.storage.usage.tokens_used(rt.features.quota.day(), [server]))[server] > 0
        # nothing there; the other channel is untouched
        await rt.features.memory_commands.summary(OTHER)
        await ask(rt, msg(2, "hello", key=OTHER))
        await rt.features.memory_commands.summary(OTHER)
        assert bodies(fake, summary=True)[-1]["model"] == "gpt-test-mini"
        assert "Korean" in str(bodies(fake, summary=True)[-1]["messages"])  # server-wide


async def test_daily_user_quota_refuses_tells_once_privately_and_still_remembers(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, DAILY_TOKENS_PER_USER="2000") as rt:
        alice = UsageKey("test", "w1", "alice")
        day = rt.features.quota.day()
        # What is left fits one reply's largest cost (~1,100: prompt + REPLY_TOKENS), not
        # that plus what the reply used.
        await rt.storage.usage.add_tokens(day, [alice], 800)
        first = await ask(rt, msg(1, "tell me something long", mention=True))
        assert first is not None and not first.failed
        spent = (await rt.storage.usage.tokens_used(day, [alice]))[alice]
        assert 800 < spent <= 2000
        told = await ask(rt, msg(2, "and again", mention=True))
        assert told is not None and told.private and "00:00 UTC" in told.text
        assert await ask(rt, msg(3, "and again?", mention=True)) is None
        assert len(reply_bodies(fake)) == 1  # no model call past the quota
        ids = [t.message_id for t in await rt.store.turns(KEY)]
        assert ids == ["m1", "reply:m1", "m2", "m3"]  # still remembered
        bob = await ask(rt, msg(4, "hi", author="Bob", mention=True))
        assert bob is not None and not bob.private  # another person has their own quota
        usage = await rt.features.config_command.configure(KEY, setting("usage"), Caller("alice",
                                                                                         "Alice"))
        assert f"you: {spent:,} of 2,000" in usage.text and "this server:" in usage.text

        rt.features.quota.clock = lambda: time.time() + 86_400  # tomorrow, after 00:00 UTC
        again = await ask(rt, msg(5, "new day", mention=True))
        assert again is not None and not again.private


async def test_a_server_may_lower_its_quota_but_not_raise_it(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, DAILY_TOKENS_PER_SERVER="100000") as rt:
        high = await rt.features.config_command.configure(
            KEY, setting("set", "daily_tokens_per_server", "200000", server=True), ADMIN)
        assert not high.ok and "100,000" in high.text
        low = await rt.features.config_command.configure(
            KEY, setting("set", "daily_tokens_per_server", "10"), ADMIN)  # server-only key
        assert low.ok, low.text
        await ask(rt, msg(1, "first", mention=True))
        refused = await ask(rt, msg(2, "second", author="Bob", mention=True))
        # 10 tokens is less than one answer: refused, privately, naming the server's limit
        assert refused is not None and refused.private
        assert "this server's daily allowance of tokens (10)" in refused.text.lower()


async def test_every_change_is_logged_with_who_and_when(tmp_path: Path, fake: FakeOpenAI) -> None:
    async with runtime(tmp_path, fake) as rt:
        member = Caller("u9", "Mallory")
        refused = await rt.features.config_command.configure(KEY, setting("set", "persona",
                                                                          "evil"), member)
        assert not refused.ok
        await rt.features.config_command.configure(KEY, setting("set", "reply_mode", "all"), ADMIN)
        await rt.features.config_command.configure(KEY, setting("unset", "reply_mode"), ADMIN)
        await rt.features.config_command.configure(KEY, setting("set", "language", "German",
                                                                server=True),
                                   Caller("u2", "Sam", may_server=True))
        history = (await rt.features.config_command.configure(KEY, setting("history"), member)).text
        lines = history.splitlines()[1:]
        assert "Sam (u2) · server: language = German" in lines[0]
        assert "Operator (op) · channel: unset reply_mode" in lines[1]
        assert "Operator (op) · channel: reply_mode = all" in lines[2]
        assert "UTC" in lines[0] and len(lines) == 3  # the refused change left no trace


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_schema("gistbot_cfg") as url:
        yield url


async def test_a_change_through_one_replica_is_honoured_by_the_other_within_5_s(
    tmp_path: Path, fake: FakeOpenAI, pg_url: str
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with runtime(tmp_path / "a", fake, DATABASE_URL=pg_url) as one, \
            runtime(tmp_path / "b", fake, DATABASE_URL=pg_url) as two:
        probe = msg(1, "no mention here")
        assert not await answered(two, probe)  # cached on the second replica
        done = await one.features.config_command.configure(KEY, setting("set", "reply_mode",
                                                                        "all"), ADMIN)
        assert done.ok
        deadline = time.monotonic() + 5.0
        while not await answered(two, probe):
            assert time.monotonic() < deadline, "the other replica ignored the change"
            await asyncio.sleep(0.05)
        reply = await ask(two, IncomingMessage(
            KEY, "m9", "bob", "Bob", "anyone?", time.time()))
        assert reply is not None and "anyone?" in reply.text


async def test_usage_without_a_limit_is_written_by_close_at_the_latest(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake) as rt:
        await ask(rt, msg(1, "hello", mention=True))
        day = rt.features.quota.day()
        shown = await rt.features.config_command.configure(KEY, setting("usage"), Caller("alice",
                                                                                         "Alice"))
        assert "(no limit)" in shown.text and "you: 0 " not in shown.text
    from bot.app import storage_for_url

    async with storage_for_url(f"sqlite:///{tmp_path / 't.db'}") as storage:
        alice, server = UsageKey("test", "w1", "alice"), UsageKey("test", "w1")
        used = await storage.usage.tokens_used(day, [alice, server])
        assert used[alice] > 0 and used[server] == used[alice]


async def test_a_long_persona_in_a_small_context_is_cut_not_the_conversation(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    small = {"CONTEXT_TOKENS": "600", "REPLY_TOKENS": "100", "SUMMARY_TOKENS": "100",
             "FACTS_TOKENS": "0"}
    async with runtime(tmp_path, fake, **small) as rt:
        persona = "You are a pirate. " + "Arr. " * 390
        await rt.features.config_command.configure(KEY, setting("set", "persona", persona), ADMIN)
        reply = await ask(rt, msg(1, "where is the treasure?", mention=True))
        assert reply is not None and "where is the treasure?" in reply.text
        [body] = reply_bodies(fake)
        system = body["messages"][0]["content"]  # type: ignore[index]
        assert system.startswith("You are a pirate.") and len(system) < len(persona)
        assert body["messages"][-1]["content"] == "[Alice]: where is the treasure?"  # type: ignore[index]
