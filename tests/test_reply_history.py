"""A reply to someone who may not read the channel's history is built without its memory.

On Discord a member can be allowed to view and write in a channel but denied Read Message
History (here: Carol's Newcomers role in #lobby): she sees only what arrives while she
looks. Asking the bot must not read her the rest — not from the summary, the recent
messages, recall or the pinned facts, nor through a reply chain that reaches back past
what she saw. Her reply is built from her message alone (she still gets one); Bob, who
may read the history, gets the channel's memory as before. Real discord.py against the
loopback Discord, the openai SDK against the loopback model.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import discord

from adapters.discord.access import reads_history
from adapters.discord.text import channel_key
from bot.app import Runtime
from bot.conversation.chain import CHAIN_HEADING
from bot.stores.owed import ReplyDue
from memory.models import NewTurn
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, content_text, is_summary_request
from tests.harness.discord import W, Watch, has_turns, make_settings, mention, posted, running

LOBBY = channel_key(W.guild_id, W.lobby)
SECRET = "VC-7731"
SAID = f"the vault code is {SECRET}"
FACT = f"vault {SECRET} opens on Fridays"


def _asked(llm: FakeOpenAI) -> list[str]:
    """The prompts of the reply requests the model got, each as one text."""
    return ["\n".join(content_text(m["content"]) for m in r.json["messages"])
            for r in llm.chat_requests if r.json is not None and not is_summary_request(r.json)]


async def _lobby_knows(fake: FakeDiscord, rt: Runtime, watch: Watch) -> dict[str, Any]:
    """#lobby's memory holds the secret: a message and a pinned fact."""
    sent = await fake.send_message(W.lobby, W.bob, SAID)
    await watch.until(lambda: has_turns(rt, 1, LOBBY))
    await rt.features.memory_commands.remember(LOBBY, FACT, author="Bob")
    return sent


async def test_a_mention_by_someone_without_the_history_is_answered_without_memory(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await _lobby_knows(discord_fake, rt, watch)
        await discord_fake.send_message(W.lobby, W.carol, mention("what is the vault code?"),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.lobby)  # she is answered
        (carol,) = _asked(discord_llm)
        assert SECRET not in carol and "what is the vault code?" in carol

        await discord_fake.send_message(W.lobby, W.bob, mention("what is the vault code?"),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.lobby, 2)
        assert SECRET in _asked(discord_llm)[-1]  # who may read the history, as before


async def test_a_reply_chain_does_not_reach_back_for_someone_without_the_history(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        first = await _lobby_knows(discord_fake, rt, watch)
        # Bob answers himself later; Carol, who sees only that, replies to it
        later = await discord_fake.send_message(W.lobby, W.bob, "and it changes monthly",
                                                reply_to=first)
        await discord_fake.send_message(W.lobby, W.carol, mention("which code?"),
                                        mentions=[W.bot_user], reply_to=later)
        await posted(discord_fake, W.lobby)
        (carol,) = _asked(discord_llm)
        assert SECRET not in carol and CHAIN_HEADING not in carol


async def test_a_late_answer_to_someone_without_the_history_is_built_without_memory(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, REPLY_CLAIM_SECONDS="1.5")
    async with running(settings) as (rt, _, watch):
        await _lobby_knows(discord_fake, rt, watch)
        mid = str(discord.utils.time_snowflake(discord.utils.utcnow()))
        turn = NewTurn(LOBBY, mid, "user", W.carol["id"], "Carol",
                       "@gistbot what is the vault code?", 8, time.time())
        await rt.store.record(replace(turn, extra=ReplyDue("", 30.0)))  # owed, unclaimed
        (sent,) = await posted(discord_fake, W.lobby)  # the client's own sweep answers it
        assert str(sent.json["message_reference"]["message_id"]) == mid
        (carol,) = _asked(discord_llm)
        assert SECRET not in carol


def test_what_discord_py_cannot_resolve_counts_as_no_history() -> None:
    client = discord.Client(intents=discord.Intents.default())
    state = client._connection
    guild = discord.Guild(data=W.guild_create(), state=state)  # type: ignore[arg-type]
    lobby, general = guild.get_channel(W.lobby), guild.get_channel(W.general)
    carol = discord.Member(data=W.member_of(W.carol), guild=guild, state=state)  # type: ignore[arg-type]
    assert not reads_history(lobby, carol) and reads_history(general, carol)
    assert not reads_history(general, discord.Object(int(W.carol["id"])))  # type: ignore[arg-type]
    unknown = discord.PartialMessageable(state=state, id=W.lobby, guild_id=W.guild_id)
    assert not reads_history(unknown, carol)
    assert reads_history(discord.PartialMessageable(state=state, id=W.dm_channel), carol)
