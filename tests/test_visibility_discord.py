"""Visibility on Discord, through a real discord.py client against the loopback Discord: a
private thread (type 12) under #general reaches a private ``/catchup`` of its members only,
never a public one, a ``/digest now`` or a scheduled digest; a member who can't read
#general's history gets no catch-up of it; a membership Discord can't confirm counts as
none; and a reply recalls only the memory of the channel it is in."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bot.app import Runtime
from bot.catchup.command import CANNOT_READ
from bot.stores.digests import DigestSchedule
from memory.models import ChannelKey
from tests.fakes.discord_server import EVERYONE_PERMISSIONS, READ_MESSAGE_HISTORY, FakeDiscord
from tests.fakes.models import Call
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.harness.catchup import citing_answer
from tests.harness.discord import (
    GENERAL,
    W,
    Watch,
    followup_to,
    has_turns,
    make_settings,
    mention,
    posted,
    running,
)

THREAD = ChannelKey("discord", str(W.guild_id), str(W.thread))
PRIVATE = ChannelKey("discord", str(W.guild_id), str(W.private_thread))
MANAGE_CHANNELS = 1 << 4
SECRET = "salary band SB-9 for Dana"


def citing(body: dict[str, Any]) -> str:
    """A catch-up model that cites every message it is shown; replies as the default."""
    last = str(body["messages"][-1]["content"])
    if not last.startswith("Messages:"):
        return default_responder(body)
    return citing_answer(Call(body["messages"], 0, "digest"), per_call=20)


def prompts(llm: FakeOpenAI, since: int = 0) -> str:
    """Everything the model was sent from request ``since`` on."""
    return "\n".join(str(m.get("content")) for r in llm.chat_requests[since:]
                     for m in (r.json or {}).get("messages", []))


async def conversation(fake: FakeDiscord, rt: Runtime, watch: Watch) -> None:
    """#general, its public thread and its private thread each say something."""
    await fake.send_message(W.general, W.bob, "release v2.4.0 is tagged")
    await fake.send_message(W.thread, W.bob, "rollback plan RB-7 is ready")
    await fake.send_message(W.private_thread, W.alice, SECRET)
    await watch.until(lambda: has_turns(rt, 1))
    await watch.until(lambda: has_turns(rt, 1, THREAD))
    await watch.until(lambda: has_turns(rt, 1, PRIVATE))


async def catchup(fake: FakeDiscord, invoker: dict[str, Any], *, public: bool = False,
                  permissions: int = EVERYONE_PERMISSIONS) -> dict[str, Any]:
    """``/catchup since:1h`` in #general; the follow-up's JSON."""
    options: dict[str, Any] = {"since": "1h"} | ({"public": True} if public else {})
    inter = await fake.interaction("catchup", invoker=invoker, channel_id=W.general,
                                   permissions=permissions, options=options)
    return (await followup_to(fake, inter)).json  # type: ignore[no-any-return]


async def test_a_private_thread_is_caught_up_only_for_its_members_and_only_privately(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = citing
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await conversation(discord_fake, rt, watch)

        seen = len(discord_llm.chat_requests)
        bob = await catchup(discord_fake, W.bob)  # not a member of the private thread
        assert "v2.4.0" in bob["content"] and "RB-7" in bob["content"]
        assert "SB-9" not in bob["content"] and "hr-private" not in bob["content"]
        assert "SB-9" not in prompts(discord_llm, seen)  # not even shown to the model
        asked = discord_fake.calls("GET", f"/channels/{W.private_thread}/thread-members/")
        assert [r.path.rsplit("/", 1)[1] for r in asked] == [W.bob["id"]]

        alice = await catchup(discord_fake, W.alice)  # a member: hers alone to read
        assert alice["flags"] & 64
        assert "SB-9" in alice["content"] and "v2.4.0" in alice["content"]

        seen = len(discord_llm.chat_requests)
        shown = await catchup(discord_fake, W.alice, public=True)  # posted for everyone
        assert not shown.get("flags", 0) & 64
        assert "v2.4.0" in shown["content"] and "RB-7" in shown["content"]
        assert "SB-9" not in shown["content"] and "SB-9" not in prompts(discord_llm, seen)


async def test_digest_now_never_includes_a_private_thread(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = citing
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await conversation(discord_fake, rt, watch)

        inter = await discord_fake.interaction(  # Alice manages #general and is a member
            "digest", invoker=W.alice, channel_id=W.general,
            permissions=EVERYONE_PERMISSIONS | MANAGE_CHANNELS, options={"schedule": "now"})
        now_post = (await followup_to(discord_fake, inter)).json
        assert not now_post.get("flags", 0) & 64
        assert "v2.4.0" in now_post["content"] and "RB-7" in now_post["content"]
        assert "SB-9" not in now_post["content"]


async def test_a_scheduled_digest_never_includes_a_private_thread(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = citing
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await conversation(discord_fake, rt, watch)
        now = time.time()
        minute = int((now % 86400) // 60 + 2) % 1440
        await rt.storage.digests.set_digest_schedule(
            DigestSchedule(GENERAL, "daily", -1, minute, "UTC", now - 86400 * 2))
        digests = rt.features.catchup_commands.digests
        assert digests is not None
        digests.clock = lambda: now + 181
        before = len(discord_fake.sent_to(W.general))
        seen = len(discord_llm.chat_requests)
        assert await digests.tick() == 1
        [post] = discord_fake.sent_to(W.general)[before:]
        assert "Daily digest" in post.json["content"] and "v2.4.0" in post.json["content"]
        assert "SB-9" not in post.json["content"] and "SB-9" not in prompts(discord_llm, seen)


async def test_no_catchup_of_a_channel_whose_history_the_member_cannot_read(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = citing
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await conversation(discord_fake, rt, watch)
        seen = len(discord_llm.chat_requests)
        answer = await catchup(discord_fake, W.alice,
                               permissions=EVERYONE_PERMISSIONS & ~READ_MESSAGE_HISTORY)
        assert answer["content"] == CANNOT_READ
        assert len(discord_llm.chat_requests) == seen


async def test_a_membership_discord_cannot_confirm_counts_as_none(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = citing
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await conversation(discord_fake, rt, watch)
        discord_fake.forbidden_channels.add(W.private_thread)  # 403 on its member list
        alice = await catchup(discord_fake, W.alice)
        assert "v2.4.0" in alice["content"] and "SB-9" not in alice["content"]


async def test_a_reply_recalls_only_the_memory_of_its_own_channel(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await conversation(discord_fake, rt, watch)
        await discord_fake.send_message(W.general, W.bob, "the launch code is LC-4411")
        await watch.until(lambda: has_turns(rt, 2))

        seen = len(discord_llm.chat_requests)
        await discord_fake.send_message(
            W.general, W.bob, mention("what is the salary band SB-9?"), mentions=[W.bot_user])
        await posted(discord_fake, W.general)
        asked = prompts(discord_llm, seen)
        assert "what is the salary band SB-9?" in asked and SECRET not in asked

        seen = len(discord_llm.chat_requests)
        await discord_fake.send_message(W.private_thread, W.alice,
                                        mention("what is the launch code LC-4411?"),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.private_thread)
        asked = prompts(discord_llm, seen)
        assert SECRET in asked and "the launch code is LC-4411" not in asked

        inter = await discord_fake.interaction("summary", invoker=W.bob, channel_id=W.general,
                                               options={"public": True})
        summary = (await followup_to(discord_fake, inter)).json["content"]
        assert "LC-4411" in summary and SECRET not in summary and "Dana" not in summary


async def test_a_catchup_in_a_dm_is_of_the_dm(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = citing
    dm = ChannelKey("discord", "dm", str(W.dm_channel))
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await conversation(discord_fake, rt, watch)
        await discord_fake.send_message(W.dm_channel, W.alice, "my own note NT-3")
        await watch.until(lambda: has_turns(rt, 1, dm))
        inter = await discord_fake.interaction("catchup", invoker=W.alice,
                                               channel_id=W.dm_channel, permissions=0,
                                               options={"since": "1h"})
        text = (await followup_to(discord_fake, inter)).json["content"]
        assert "NT-3" in text and "SB-9" not in text and "v2.4.0" not in text
