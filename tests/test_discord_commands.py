"""Discord slash commands through a real discord.py client against a loopback Discord:
deferred then answered (ephemeral unless public), and the permission ``/reset`` and
``/forget`` need.
"""

from __future__ import annotations

from pathlib import Path

from tests.fakes.discord_server import EVERYONE_PERMISSIONS, MANAGE_MESSAGES, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import (
    GENERAL,
    W,
    followup_to,
    has_turns,
    make_settings,
    running,
    turns,
)


async def test_summary_is_deferred_then_answered_ephemerally(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "the launch is on Friday")
        await discord_fake.send_message(W.general, W.bob, "ticket OPS-42 tracks it")
        await watch.until(lambda: has_turns(rt, 2))

        inter = await discord_fake.interaction("summary", invoker=W.alice, channel_id=W.general)
        followup = await followup_to(discord_fake, inter)
        (callback,) = discord_fake.calls("POST", f"/interactions/{inter['id']}/")
        assert callback.path == f"/interactions/{inter['id']}/{inter['token']}/callback"
        assert callback.json == {"type": 5, "data": {"flags": 64}}
        assert callback.at <= followup.at
        assert followup.json["flags"] & 64
        assert "OPS-42" in followup.json["content"]
        assert "Remembering 2 messages" in followup.json["content"]
        assert followup.json["allowed_mentions"]["parse"] == []

        public = await discord_fake.interaction(
            "summary", invoker=W.alice, channel_id=W.general, options={"public": True}
        )
        shown = await followup_to(discord_fake, public)
        (callback,) = discord_fake.calls("POST", f"/interactions/{public['id']}/")
        assert callback.json == {"type": 5}
        assert not shown.json.get("flags", 0) & 64


async def test_summary_of_an_empty_channel_says_so(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)):
        inter = await discord_fake.interaction("summary", invoker=W.alice, channel_id=W.readonly)
        followup = await followup_to(discord_fake, inter)
        assert "Nothing to summarize" in followup.json["content"]
        assert discord_llm.chat_requests == []


async def test_reset_is_refused_without_permission_and_done_with_it(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "remember the code word: heron")
        await discord_fake.send_message(W.general, W.bob, "noted")
        await watch.until(lambda: has_turns(rt, 2))

        refused = await discord_fake.interaction("reset", invoker=W.alice, channel_id=W.general)
        answer = await followup_to(discord_fake, refused)
        (callback,) = discord_fake.calls("POST", f"/interactions/{refused['id']}/")
        assert callback.json == {"type": 5, "data": {"flags": 64}}
        assert "Manage Messages permission" in answer.json["content"]
        assert answer.json["flags"] & 64
        assert len(await turns(rt)) == 2

        done = await discord_fake.interaction(
            "reset", invoker=W.bob, channel_id=W.general, permissions=MANAGE_MESSAGES
        )
        answer = await followup_to(discord_fake, done)
        assert answer.json["content"] == "Done: I forgot 2 messages from this channel."
        assert answer.json["flags"] & 64
        assert await turns(rt) == []


async def test_remember_memory_forget_commands_with_forget_needing_permission(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _):
        pinned = await discord_fake.interaction(
            "remember", invoker=W.alice, channel_id=W.general,
            options={"text": "the demo is on Thursday"},
        )
        answer = await followup_to(discord_fake, pinned)
        (callback,) = discord_fake.calls("POST", f"/interactions/{pinned['id']}/")
        assert callback.json == {"type": 5, "data": {"flags": 64}}  # deferred, ephemeral
        assert answer.json["content"].startswith("Remembered as fact #")
        [fact] = await rt.memory.facts(GENERAL)
        assert fact.text == "the demo is on Thursday" and fact.pinned

        listing = await followup_to(discord_fake, await discord_fake.interaction(
            "memory", invoker=W.alice, channel_id=W.general))
        assert listing.json["flags"] & 64
        assert f"[fact #{fact.id}] the demo is on Thursday" in listing.json["content"]

        refused = await followup_to(discord_fake, await discord_fake.interaction(
            "forget", invoker=W.alice, channel_id=W.general, options={"fact": str(fact.id)}))
        assert "Manage Messages permission" in refused.json["content"]
        assert refused.json["flags"] & 64
        assert len(await rt.memory.facts(GENERAL)) == 1

        done = await followup_to(discord_fake, await discord_fake.interaction(
            "forget", invoker=W.bob, channel_id=W.general,
            permissions=EVERYONE_PERMISSIONS | MANAGE_MESSAGES,
            options={"fact": "demo"}))
        assert done.json["content"] == f"Forgot fact #{fact.id}: the demo is on Thursday"
        assert await rt.memory.facts(GENERAL) == []
        assert discord_llm.chat_requests == []


async def test_forget_with_a_superscript_or_huge_number_answers_no_such_fact(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _):
        await followup_to(discord_fake, await discord_fake.interaction(
            "remember", invoker=W.alice, channel_id=W.general, options={"text": "keep me"}))
        for ref in ("²", "99999999999999999999999"):
            answer = await followup_to(discord_fake, await discord_fake.interaction(
                "forget", invoker=W.bob, channel_id=W.general,
                permissions=EVERYONE_PERMISSIONS | MANAGE_MESSAGES, options={"fact": ref}))
            assert answer.json["content"] == f"I have no fact matching {ref!r} here."
        assert len(await rt.memory.facts(GENERAL)) == 1
