"""The Discord client connecting: a real discord.py client against a loopback Discord
(tests/fakes/discord_server.py): login, identity, intents, slash command registration,
``run_discord``, sharding, and memory across a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import discord
import pytest

from adapters.discord import run_discord
from bot.app import Runtime
from bot.errors import ConfigError
from tests.fakes.discord_server import MANAGE_MESSAGES, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import (
    TOKEN,
    W,
    has_turns,
    make_settings,
    mention,
    posted,
    running,
    turns,
)


async def test_login_ready_identity_and_global_command_sync(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, client, _):
        assert client.user is not None and client.user.id == W.bot_id
        assert [g.id for g in client.guilds] == [W.guild_id]
        assert rt.service.identity("discord") == (str(W.bot_id), "gistbot")
        assert discord_fake.identifies[0]["shard"] == [0, 1]  # auto-sharded, one shard here
        intents = discord.Intents._from_value(discord_fake.identifies[0]["intents"])
        assert intents == discord.Intents(
            guilds=True, guild_messages=True, dm_messages=True, message_content=True
        )
        assert client.allowed_mentions is not None
        assert client.allowed_mentions.to_dict() == {"parse": []}
        (sync,) = discord_fake.calls("PUT", f"/applications/{W.app_id}/")
        assert sync.path == f"/applications/{W.app_id}/commands"
        commands = {c["name"]: c for c in sync.json}
        assert set(commands) == {"summary", "reset", "remember", "memory", "forget", "aboutme",
                                 "config", "catchup", "digest", "help"}
        assert commands["config"]["default_member_permissions"] is None  # show is for anyone
        assert int(commands["reset"]["default_member_permissions"]) == MANAGE_MESSAGES
        assert int(commands["digest"]["default_member_permissions"]) == 1 << 4  # Manage Channels
        assert commands["catchup"]["default_member_permissions"] is None
        assert int(commands["forget"]["default_member_permissions"]) == MANAGE_MESSAGES
        assert commands["remember"]["default_member_permissions"] is None
        assert commands["summary"]["default_member_permissions"] is None
        assert commands["help"]["default_member_permissions"] is None
        assert commands["aboutme"]["default_member_permissions"] is None  # anyone's own notes
        (option,) = commands["summary"]["options"]
        assert (option["name"], option["type"], option["required"]) == ("public", 5, False)


async def test_commands_sync_instantly_to_configured_guilds(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, DISCORD_GUILD_IDS=str(W.guild_id))
    async with running(settings):
        (sync,) = discord_fake.calls("PUT", f"/applications/{W.app_id}/")
        assert sync.path == f"/applications/{W.app_id}/guilds/{W.guild_id}/commands"
        assert {c["name"] for c in sync.json} == {"summary", "reset", "remember", "memory",
                                                  "forget", "aboutme", "config", "catchup",
                                                  "digest", "help"}


async def test_run_discord_connects_and_stops_when_cancelled(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with Runtime.open(make_settings(tmp_path, discord_llm)) as rt:
        task = asyncio.create_task(run_discord(rt.features, rt.settings))
        await discord_fake.wait_for(lambda f: f.identifies)
        assert discord_fake.identifies[0]["token"] == TOKEN
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        await discord_fake.wait_for(lambda f: not f.connected)


async def test_run_discord_with_a_rejected_token_is_a_config_error(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_fake.token = "another-token"
    async with Runtime.open(make_settings(tmp_path, discord_llm)) as rt:
        with pytest.raises(ConfigError, match="DISCORD_TOKEN was rejected"):
            await asyncio.wait_for(run_discord(rt.features, rt.settings), 10)


async def test_shard_settings_start_only_this_process_shards(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, SHARD_COUNT="4", SHARD_IDS="1,3")
    async with Runtime.open(settings) as rt:
        task = asyncio.create_task(run_discord(rt.features, rt.settings))
        try:
            await discord_fake.wait_for(lambda f: len(f.identifies) >= 2, within=20)
            assert sorted(i["shard"] for i in discord_fake.identifies) == [[1, 4], [3, 4]]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_memory_survives_a_restart_on_the_same_sqlite_file(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm)
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "my order number is 77-4417")
        await watch.until(lambda: has_turns(rt, 1))
    async with running(settings) as (rt, _, watch):
        discord_llm.push("It is 77-4417.")
        await discord_fake.send_message(
            W.general, W.bob, mention("what is alice's order?"), mentions=[W.bot_user]
        )
        (reply,) = await posted(discord_fake, W.general)
        assert reply.json["content"] == "It is 77-4417."
        prompt = " ".join(str(m["content"]) for m in discord_llm.chat_requests[-1].json["messages"])
        assert "77-4417" in prompt and "Alice" in prompt
        assert len(await turns(rt)) == 3
