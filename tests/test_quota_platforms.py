"""Daily token limits on the commands that call the model, through the real platform
libraries: slack-bolt over HTTP against the loopback Slack and discord.py against the
loopback Discord, both with the real ``openai`` SDK against the loopback OpenAI fake, where
requests are counted. A refused command is answered with the quota notice, privately."""

from __future__ import annotations

import time
from pathlib import Path

from bot.stores.usage import UsageKey
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import W, followup_to, has_turns, make_settings, running
from tests.harness.slack import KEY, mention, open_harness


def slack_env(llm: FakeOpenAI, **limits: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": llm.base_url, "MODEL_NAME": "gpt-test", "LLM_MAX_RETRIES": "0",
            **limits}


async def test_slack_catchup_over_the_servers_limit_is_refused_privately_without_a_call(
    tmp_path: Path, discord_llm: FakeOpenAI
) -> None:
    async with open_harness(tmp_path, None, slack_env(
            discord_llm, DAILY_TOKENS_PER_SERVER="3000")) as h:
        await h.event(mention("release v2.4.0 is tagged", kind="message",
                              ts=f"{time.time() - 30:.6f}"), event_id="E1")
        await h.settle()
        await h.rt.storage.usage.add_tokens(h.rt.features.quota.day(),
                                            [UsageKey("slack", KEY.workspace)], 3000)
        await h.command("/catchup", user="U2", text="1d public")
        [call] = await h.fake.wait_for("response_url:catchup")
        assert call.params["response_type"] == "ephemeral"  # asked public, told privately
        assert "this server's daily allowance of tokens (3,000)" in call.params["text"]
        assert discord_llm.chat_requests == []


async def test_slack_summary_of_a_person_over_their_limit_is_refused_and_others_answered(
    tmp_path: Path, discord_llm: FakeOpenAI
) -> None:
    async with open_harness(tmp_path, None, slack_env(
            discord_llm, DAILY_TOKENS_PER_USER="50000")) as h:
        await h.event(mention("order ORD-5521 waits", kind="message",
                              ts=f"{time.time() - 30:.6f}"), event_id="E1")
        await h.settle()
        day = h.rt.features.quota.day()
        await h.rt.storage.usage.add_tokens(day, [UsageKey("slack", KEY.workspace, "U1")],
                                            50000)
        await h.command("/summary", user="U1")
        [refused] = await h.fake.wait_for("response_url:summary")
        assert "your daily allowance of tokens (50,000)" in refused.params["text"]
        assert discord_llm.chat_requests == []
        await h.command("/summary", user="U2")
        [_, answered] = await h.fake.wait_for("response_url:summary", 2)
        assert "ORD-5521" in answered.params["text"]
        assert len(discord_llm.chat_requests) == 1
        await h.rt.features.quota.flush()
        bob = UsageKey("slack", KEY.workspace, "U2")
        server = UsageKey("slack", KEY.workspace)
        kinds = await h.rt.storage.usage.tokens_by_kind(day, [bob, server])
        assert set(kinds[bob]) == {"summary"} and kinds[bob]["summary"] > 0
        assert kinds[UsageKey("slack", KEY.workspace)] == kinds[bob]


async def test_discord_summary_over_your_limit_is_an_ephemeral_notice_without_a_call(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, DAILY_TOKENS_PER_USER="10")
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.bob, "ticket OPS-42 tracks the launch")
        await watch.until(lambda: has_turns(rt, 1))
        day = rt.features.quota.day()
        alice = UsageKey("discord", str(W.guild_id), W.alice["id"])
        await rt.storage.usage.add_tokens(day, [alice], 10)
        inter = await discord_fake.interaction("summary", invoker=W.alice, channel_id=W.general)
        answer = await followup_to(discord_fake, inter)
        assert answer.json["flags"] & 64
        assert "your daily allowance of tokens (10)" in answer.json["content"]
        assert discord_llm.chat_requests == []


async def test_discord_catchup_over_the_servers_limit_is_refused_without_a_call(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, DAILY_TOKENS_PER_SERVER="3000")
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.bob, "ticket OPS-42 tracks the launch")
        await watch.until(lambda: has_turns(rt, 1))
        await rt.storage.usage.add_tokens(rt.features.quota.day(),
                                  [UsageKey("discord", str(W.guild_id))], 3000)
        inter = await discord_fake.interaction("catchup", invoker=W.alice, channel_id=W.general,
                                               options={"since": "1d"})
        answer = await followup_to(discord_fake, inter)
        assert answer.json["flags"] & 64
        assert "this server's daily allowance of tokens (3,000)" in answer.json["content"]
        assert discord_llm.chat_requests == []


async def test_discord_catchup_asked_in_public_over_the_limit_is_told_only_to_the_caller(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, DAILY_TOKENS_PER_SERVER="3000")
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.bob, "ticket OPS-42 tracks the launch")
        await watch.until(lambda: has_turns(rt, 1))
        await rt.storage.usage.add_tokens(rt.features.quota.day(),
                                  [UsageKey("discord", str(W.guild_id))], 3000)
        inter = await discord_fake.interaction("catchup", invoker=W.alice, channel_id=W.general,
                                               options={"since": "1d", "public": True})
        original = f"/webhooks/{W.app_id}/{inter['token']}/messages/@original"
        await discord_fake.wait_for(lambda f: f.calls("DELETE", original))
        (callback,) = discord_fake.calls("POST", f"/interactions/{inter['id']}/")
        assert callback.json == {"type": 5}  # deferred in public, as asked
        (resolved,) = discord_fake.calls("PATCH", original)
        assert "allowance" not in resolved.json["content"]  # nothing said in public
        answer = await followup_to(discord_fake, inter)
        assert answer.json["flags"] & 64  # after the deferral is resolved: its own visibility
        assert "this server's daily allowance of tokens (3,000)" in answer.json["content"]
        (deleted,) = discord_fake.calls("DELETE", original)
        assert resolved.at <= answer.at <= deleted.at
        assert discord_llm.chat_requests == []


async def test_a_limit_below_one_calls_cost_says_so_instead_of_claiming_it_was_used(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, DAILY_TOKENS_PER_USER="100")
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.bob, "ticket OPS-42 tracks the launch")
        await watch.until(lambda: has_turns(rt, 1))
        inter = await discord_fake.interaction("summary", invoker=W.alice, channel_id=W.general)
        answer = await followup_to(discord_fake, inter)
        assert answer.json["flags"] & 64
        text = answer.json["content"]
        assert "You have used" not in text  # nothing was used: no call fits in 100 tokens
        assert "Your daily allowance of tokens (100) is less than one answer needs" in text
        assert "after 00:00 UTC" not in text  # waiting for tomorrow would not help
        assert discord_llm.chat_requests == []
