"""Who may talk to the bot on Discord, through the real discord.py client against the
loopback Discord: blocked people, people outside an allow list, blocked roles, blocked
channels (and their threads) and direct messages when DMs are off.

Each test first lets a blocked message be handled, then checks what the fake Discord saw:
no message in the channel, and storage as the settings say.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.access import REFUSED
from memory.models import ChannelKey
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.deadlines import scaled
from tests.harness.discord import (
    GENERAL,
    W,
    followup_to,
    make_settings,
    mention,
    posted,
    running,
    turns,
)

CAROL = W.carol["id"]
THREAD = ChannelKey("discord", str(W.guild_id), str(W.thread))
DM = ChannelKey("discord", "dm", str(W.dm_channel))


async def _refused_command(fake: FakeDiscord, invoker: dict[str, str], channel: int) -> None:
    """``/summary`` by ``invoker`` is answered with the private refusal, not a summary."""
    inter = await fake.interaction("summary", invoker=invoker, channel_id=channel)
    followup = await followup_to(fake, inter)
    assert followup.json["content"] == REFUSED
    assert followup.json["flags"] & 64  # only the caller sees it


async def _answered_only(fake: FakeDiscord, llm: FakeOpenAI, channel: int,
                         who: dict[str, str]) -> None:
    """``who`` mentions the bot in ``channel`` and is answered; that answer is the only bot
    message there and the only model call of the test, so nothing refused earlier was
    answered (or is being answered: it was sent first)."""
    sent = await fake.send_message(channel, who, mention("hello"), mentions=[W.bot_user])
    (reply,) = await posted(fake, channel)
    assert str(reply.json["message_reference"]["message_id"]) == sent["id"]
    assert len(llm.chat_requests) == 1


async def test_a_blocked_user_gets_no_reply_and_no_command_output_but_is_remembered(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, BLOCKED_USERS=CAROL)
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.carol, mention("tell me a secret"),
                                        mentions=[W.bot_user])
        await watch.handled(1)
        assert discord_fake.sent_to(W.general) == []
        assert discord_llm.chat_requests == []
        assert await turns(rt) == [("user", "Carol", "@gistbot tell me a secret")]
        await _refused_command(discord_fake, W.carol, W.general)

        await _answered_only(discord_fake, discord_llm, W.general, W.alice)  # others as before


async def test_record_blocked_false_keeps_nothing_of_a_blocked_user(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, BLOCKED_USERS=CAROL, RECORD_BLOCKED="false")
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.carol, mention("my phone is 555-0100"),
                                        mentions=[W.bot_user])
        await discord_fake.send_message(W.general, W.alice, "and mine is private")
        await watch.handled(2)
        assert await turns(rt) == [("user", "Alice", "and mine is private")]
        await _answered_only(discord_fake, discord_llm, W.general, W.alice)


async def test_a_user_outside_a_non_empty_allow_list_is_ignored(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, ALLOWED_USERS=W.alice["id"])
    async with running(settings) as (_, _, watch):
        await discord_fake.send_message(W.general, W.bob, mention("am I allowed?"),
                                        mentions=[W.bot_user])
        await watch.handled(1)
        assert discord_fake.sent_to(W.general) == []
        await _refused_command(discord_fake, W.bob, W.general)
        await _answered_only(discord_fake, discord_llm, W.general, W.alice)


async def test_a_blocked_role_is_ignored_and_an_allowed_role_admits(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    # Carol holds the Newcomers role, Bob the moderators'; Alice neither
    settings = make_settings(tmp_path, discord_llm, BLOCKED_ROLES=str(W.newcomer_role),
                             ALLOWED_ROLES=str(W.mod_role))
    async with running(settings) as (_, _, watch):
        for who in (W.carol, W.alice):
            await discord_fake.send_message(W.general, who, mention("hi"), mentions=[W.bot_user])
        await watch.handled(2)
        assert discord_fake.sent_to(W.general) == []
        await _refused_command(discord_fake, W.carol, W.general)
        await _answered_only(discord_fake, discord_llm, W.general, W.bob)


async def test_a_blocked_channel_and_its_threads_get_no_reply_and_nothing_is_stored(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, BLOCKED_CHANNELS=str(W.general))
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, mention("anyone home?"),
                                        mentions=[W.bot_user])
        await discord_fake.send_message(W.thread, W.alice, mention("in the thread?"),
                                        mentions=[W.bot_user])
        await watch.handled(2)
        assert discord_fake.sent_to(W.general) == [] and discord_fake.sent_to(W.thread) == []
        assert await turns(rt) == [] and await turns(rt, THREAD) == []
        await _refused_command(discord_fake, W.alice, W.general)
        await _refused_command(discord_fake, W.alice, W.thread)
        await _answered_only(discord_fake, discord_llm, W.lobby, W.alice)  # others as before
        assert discord_fake.sent_to(W.general) == [] and discord_fake.sent_to(W.thread) == []


async def test_a_direct_message_gets_no_reply_when_dms_are_off(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, ALLOW_DMS="false")
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.dm_channel, W.alice, "hi in private")
        await watch.handled(1)
        assert discord_fake.sent_to(W.dm_channel) == []
        assert await turns(rt, DM) == []
        await _refused_command(discord_fake, W.alice, W.dm_channel)
        await _answered_only(discord_fake, discord_llm, W.general, W.alice)
        assert discord_fake.sent_to(W.dm_channel) == []
        assert [role for role, _, _ in await turns(rt, GENERAL)] == ["user", "assistant"]


async def test_a_server_blocks_a_user_with_config_and_cannot_unblock_the_operators(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    manage_guild = 1 << 5
    settings = make_settings(tmp_path, discord_llm, BLOCKED_USERS=CAROL)
    async with running(settings) as (rt, _, watch):
        async def config(**options: str) -> str:
            inter = await discord_fake.interaction("config", invoker=W.bob, channel_id=W.general,
                                                   permissions=manage_guild, options=options)
            return str((await followup_to(discord_fake, inter)).json["content"])

        assert await config(action="set", key="blocked_users", value="alice") == (
            "'alice' is not a user id: list ids, not names or mentions, separated by commas "
            "(Discord: Developer Mode, then a person's Copy User ID; Slack: a profile's ⋮ → "
            "Copy member ID).")
        alice = W.alice["id"]
        assert await config(action="set", key="blocked_users", value=alice,
                            scope="server") == f"Set blocked_users for this server to {alice}."
        assert await config(action="set", key="allowed_users", value=CAROL,
                            scope="server") == f"Set allowed_users for this server to {CAROL}."
        for who in (W.alice, W.carol):
            await discord_fake.send_message(W.general, who, mention("hi"), mentions=[W.bot_user])
        await watch.handled(2)
        assert discord_fake.sent_to(W.general) == []
        await _refused_command(discord_fake, W.alice, W.general)
        assert [name for _, name, _ in await turns(rt)] == ["Alice", "Carol"]  # RECORD_BLOCKED

        # Bob is outside the server's allow list now, but may still undo it
        assert await config(action="unset", key="blocked_users", scope="server") == (
            "Unset blocked_users for this server; the default applies.")
        await config(action="unset", key="allowed_users", scope="server")
        await _answered_only(discord_fake, discord_llm, W.general, W.alice)


async def test_backfill_after_downtime_keeps_the_lists_too(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "before")
        await watch.handled(1)
    # the bot is down: only the history has these
    await discord_fake.send_message(W.general, W.carol, "missed, by Carol", deliver=False)
    await discord_fake.send_message(W.general, W.alice, "missed, by Alice", deliver=False)

    settings = make_settings(tmp_path, discord_llm, BLOCKED_USERS=CAROL, RECORD_BLOCKED="false")
    async with running(settings, backfill=True) as (rt, client, _):
        assert client.backfill is not None
        async with asyncio.timeout(scaled(10)):
            await client.backfill.wait_runs(1)
        assert [text for _, _, text in await turns(rt)] == ["before", "missed, by Alice"]
