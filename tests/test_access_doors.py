"""The other doors to the bot, tried by a hostile caller on Discord (real discord.py against
the loopback Discord): a blocked person replying to the bot's answer instead of mentioning
it, a blocked person's slash command in a thread of an allowed channel, a reply in a public
channel whose reference points into a private thread, and a forward of the bot's answer
into another channel (a forward is not a reply: nobody addressed the bot there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.discord.text import channel_key
from bot.access import REFUSED
from bot.conversation.chain import CHAIN_HEADING
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, content_text, is_summary_request
from tests.harness.discord import (
    W,
    followup_to,
    has_turns,
    make_settings,
    mention,
    posted,
    running,
)

PRIVATE = channel_key(W.guild_id, W.private_thread)
SECRET = "the launch code is LC-5521"
JSON = dict[str, Any]


def _prompts(llm: FakeOpenAI) -> list[str]:
    return ["\n".join(content_text(m["content"]) for m in r.json["messages"])
            for r in llm.chat_requests if r.json is not None and not is_summary_request(r.json)]


def _bots_message(fake: FakeDiscord, channel: int) -> JSON:
    """The bot's last message in ``channel`` as Discord stores it."""
    return [m for m in fake.history(channel) if m["author"]["id"] == str(W.bot_id)][-1]


async def test_a_blocked_person_replying_to_the_bot_is_not_answered(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, BLOCKED_USERS=W.carol["id"])
    async with running(settings) as (_, _, watch):
        await discord_fake.send_message(W.general, W.alice, mention("hello"),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.general)
        answer = _bots_message(discord_fake, W.general)
        # Carol replies to the bot's answer (a reply to the bot is addressed to it)
        await discord_fake.send_message(W.general, W.carol, "and what about me?",
                                        reply_to=answer)
        await watch.handled(2)
        # Alice does the same and is answered: only her reply follows
        await discord_fake.send_message(W.general, W.alice, "thanks!", reply_to=answer)
        (_, reply) = await posted(discord_fake, W.general, 2)
        assert reply.json["content"].endswith("thanks!")  # the offline-style echo of hers
        assert len(_prompts(discord_llm)) == 2  # Carol's was never put to the model


async def test_a_blocked_person_is_refused_in_a_thread_of_an_allowed_channel(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, ALLOWED_CHANNELS=str(W.general),
                             BLOCKED_USERS=W.carol["id"])
    async with running(settings) as (_, _, _):
        async def summary(who: JSON) -> str:
            inter = await discord_fake.interaction("summary", invoker=who,
                                                   channel_id=W.thread)
            return str((await followup_to(discord_fake, inter)).json["content"])

        assert await summary(W.carol) == REFUSED
        assert await summary(W.alice) != REFUSED  # the thread of an allowed channel is in


async def test_a_reply_in_a_public_channel_never_pulls_in_a_private_thread(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        inside = await discord_fake.send_message(W.private_thread, W.alice, SECRET)
        await watch.until(lambda: has_turns(rt, 1, PRIVATE))  # stored, and cached
        # Bob (not a member) replies in #general with a reference into the private thread
        await discord_fake.send_message(W.general, W.bob, mention("and this?"),
                                        mentions=[W.bot_user], reply_to=inside)
        await posted(discord_fake, W.general)
        (prompt,) = _prompts(discord_llm)
        assert "LC-5521" not in prompt and CHAIN_HEADING not in prompt
        assert discord_fake.calls("GET", f"/channels/{W.private_thread}/messages") == []


async def test_a_forward_of_the_bots_answer_is_not_a_reply_to_it(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (_, _, watch):
        await discord_fake.send_message(W.general, W.alice, mention("hello"),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.general)
        answer = _bots_message(discord_fake, W.general)
        # Alice forwards it into #lobby, addressing nobody
        forward = await discord_fake.send_message(W.lobby, W.alice, "", deliver=False)
        forward["message_reference"] = {"type": 1, "message_id": answer["id"],
                                        "channel_id": str(W.general),
                                        "guild_id": str(W.guild_id)}
        forward["message_snapshots"] = [{"message": {
            k: answer[k] for k in ("type", "content", "embeds", "attachments", "timestamp",
                                   "edited_timestamp", "flags")}}]
        await discord_fake.dispatch("MESSAGE_CREATE", forward)
        await watch.handled(2)
        # then she mentions the bot there: that is the one answer, and the one model call
        # (the forward, handled first, would have asked the model first)
        control = await discord_fake.send_message(W.lobby, W.alice, mention("hi"),
                                                  mentions=[W.bot_user])
        (reply,) = await posted(discord_fake, W.lobby)
        assert str(reply.json["message_reference"]["message_id"]) == control["id"]
        assert len(_prompts(discord_llm)) == 2
