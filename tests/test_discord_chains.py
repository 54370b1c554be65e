"""Discord reply chains as conversations: a reply's chain (the message it references, that
one's, and so on up) goes into its prompt, through a real discord.py client against the
loopback Discord, the real ChatService on real SQLite and the real openai SDK against the
loopback OpenAI fake: found in discord.py's cache, in storage or by one fetch each, within
its share of the budget, bounded in depth, ended without error by a deleted, rate-limited
or slow message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.app import Runtime
from bot.conversation.chain import CHAIN_HEADING
from bot.conversation.prompts import FENCE_CLOSE
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.faults import FAULTS, Fault
from tests.fakes.openai_server import FakeOpenAI, content_text, is_summary_request
from tests.harness.discord import W, has_turns, make_settings, mention, posted, running

JSON = dict[str, Any]
CONTEXT, REPLY = 2048, 256
# a small budget, and no compaction (its summary would tell of the chain another way)
SMALL = {"CONTEXT_TOKENS": str(CONTEXT), "REPLY_TOKENS": str(REPLY),
         "WINDOW_TOKENS": "200000", "KEEP_TOKENS": "100000"}
SIDE = [  # a side discussion between Alice and Bob, each a reply to the one before
    "the kestrel migration needs a new storage bucket before friday",
    "we could reuse the falcon bucket from last spring",
    "falcon is read-only for the auditors though",
    "then ask Dana for a temporary copy in the heron region",
]
FILLER = "lunch today is at the noodle place on fourth street, table for {} people"


def reply_requests(llm: FakeOpenAI) -> list[JSON]:
    """The reply requests the model endpoint received (not summaries)."""
    return [r.json for r in llm.chat_requests
            if r.json is not None and not is_summary_request(r.json)]


def chain_shown(body: JSON) -> list[str]:
    """The lines of the prompt's reply-chain section, in order."""
    system = content_text(body["messages"][0]["content"])
    if CHAIN_HEADING not in system:
        return []
    section = system.split(CHAIN_HEADING, 1)[1].split(FENCE_CLOSE, 1)[0]
    return [line for line in section.splitlines() if line.strip()]


def prompt_tokens(rt: Runtime, body: JSON) -> int:
    """What the prompt costs, counted as the budget counts a message."""
    tok = rt.memory.tokenizer
    return sum(tok.count(content_text(m["content"])) + 4 for m in body["messages"])


async def side_discussion(fake: FakeDiscord, texts: list[str], *, deliver: bool = True,
                          first: JSON | None = None) -> list[JSON]:
    """Alice and Bob in turn, each message a reply to the one before (``first``: the
    message the first one replies to)."""
    sent: list[JSON] = []
    for i, text in enumerate(texts):
        author = W.alice if i % 2 == 0 else W.bob
        parent = sent[-1] if sent else first
        sent.append(await fake.send_message(W.general, author, text, deliver=deliver,
                                            **({"reply_to": parent} if parent else {})))
    return sent


async def busy(fake: FakeDiscord, n: int) -> None:
    """``n`` messages of other people in between."""
    for i in range(n):
        await fake.send_message(W.general, W.carol, FILLER.format(i))


def single_reads(fake: FakeDiscord) -> list[str]:
    """The message ids the bot read one by one (``GET /channels/{id}/messages/{id}``)."""
    prefix = f"/channels/{W.general}/messages/"
    return [r.path.removeprefix(prefix) for r in fake.calls("GET", prefix)]


async def test_a_reply_in_a_busy_channel_gets_its_whole_chain_in_order(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm, **SMALL)) as (rt, _, _):
        chain = await side_discussion(discord_fake, SIDE)
        await busy(discord_fake, 120)
        await discord_fake.send_message(W.general, W.bob, mention("so which bucket?"),
                                        mentions=[W.bot_user], reply_to=chain[-1])
        await posted(discord_fake, W.general)
        (body,) = reply_requests(discord_llm)
        shown = chain_shown(body)
        assert shown == [f"- {'Alice' if i % 2 == 0 else 'Bob'}: {text}"
                         for i, text in enumerate(SIDE)]
        verbatim = " ".join(content_text(m["content"]) for m in body["messages"][1:])
        assert SIDE[0] not in verbatim  # it had left the verbatim window: only the chain has it
        assert FILLER.format(119) in verbatim
        assert single_reads(discord_fake) == []  # cache and storage held every link
        assert prompt_tokens(rt, body) <= CONTEXT - REPLY


async def test_a_reply_to_the_bot_gets_the_chain_through_the_bot_s_own_message(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.push("Reuse the falcon bucket.")
    async with running(make_settings(tmp_path, discord_llm, **SMALL)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, mention(SIDE[0]),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.general)
        (answer,) = [m for m in discord_fake.messages.values()
                     if m["author"]["id"] == str(W.bot_id)]
        await busy(discord_fake, 120)
        await watch.until(lambda: has_turns(rt, 2 + 120))
        await discord_fake.send_message(W.general, W.alice, "falcon is read-only though",
                                        reply_to=answer)
        await posted(discord_fake, W.general, 2)
        shown = chain_shown(reply_requests(discord_llm)[-1])
        assert shown == [f"- Alice: @gistbot {SIDE[0]}",
                         "- gistbot (bot): Reuse the falcon bucket."]
        assert single_reads(discord_fake) == []


async def test_a_chain_longer_than_its_share_is_cut_at_the_far_end_within_budget(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    texts = [f"step {i} of the heron rollout: " + "the long explanation of it, " * 8
             for i in range(16)]
    async with running(make_settings(tmp_path, discord_llm, **SMALL)) as (rt, _, _):
        chain = await side_discussion(discord_fake, texts)
        await busy(discord_fake, 60)
        await discord_fake.send_message(W.general, W.bob, mention("where are we?"),
                                        mentions=[W.bot_user], reply_to=chain[-1])
        await posted(discord_fake, W.general)
        (body,) = reply_requests(discord_llm)
        shown = chain_shown(body)
        assert 1 <= len(shown) < len(texts)
        nearest = texts[len(texts) - len(shown):]  # the near end, in order
        assert [line.split(": ", 1)[1] for line in shown] == [" ".join(t.split())
                                                              for t in nearest]
        assert prompt_tokens(rt, body) <= CONTEXT - REPLY


async def test_links_past_discord_py_s_cache_come_from_storage_without_a_call(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm, **SMALL)) as (rt, client, watch):
        chain = await side_discussion(discord_fake, SIDE)
        await busy(discord_fake, 120)
        await watch.until(lambda: has_turns(rt, len(SIDE) + 120))
        client._connection._messages.clear()  # type: ignore[union-attr]  # a busy server's cache moved on
        await discord_fake.send_message(W.general, W.bob, mention("so which bucket?"),
                                        mentions=[W.bot_user], reply_to=chain[-1])
        await posted(discord_fake, W.general)
        (body,) = reply_requests(discord_llm)
        assert [line.split(": ", 1)[1] for line in chain_shown(body)] == SIDE
        assert single_reads(discord_fake) == []


async def test_a_chain_never_leaves_its_channel(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (_, _, _):
        elsewhere = await discord_fake.send_message(W.lobby, W.alice, SIDE[0], deliver=False)
        await discord_fake.send_message(W.general, W.bob, mention("and this?"),
                                        mentions=[W.bot_user], reply_to=elsewhere)
        await posted(discord_fake, W.general)
        (body,) = reply_requests(discord_llm)
        assert chain_shown(body) == [] and SIDE[0] not in str(body)
        assert discord_fake.calls("GET", f"/channels/{W.lobby}/messages/") == []


async def test_a_link_in_neither_cache_nor_storage_is_fetched_once(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (_, _, _):
        # posted while the bot was away: neither cached nor stored
        early = await side_discussion(discord_fake, SIDE[:2], deliver=False)
        await discord_fake.send_message(W.general, W.alice, mention("so?"),
                                        mentions=[W.bot_user], reply_to=early[-1])
        await posted(discord_fake, W.general)
        (body,) = reply_requests(discord_llm)
        assert chain_shown(body) == [f"- Alice: {SIDE[0]}", f"- Bob: {SIDE[1]}"]
        assert single_reads(discord_fake) == [early[0]["id"]]


async def test_a_deleted_link_ends_the_chain_and_the_reply_still_comes(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (_, _, _):
        early = await side_discussion(discord_fake, SIDE[:3], deliver=False)
        discord_fake.messages.pop(int(early[1]["id"]))  # deleted while the bot was away
        await discord_fake.send_message(W.general, W.bob, mention("so?"),
                                        mentions=[W.bot_user], reply_to=early[-1])
        (reply,) = await posted(discord_fake, W.general)
        assert reply.json["content"].startswith("You said:")
        (body,) = reply_requests(discord_llm)
        assert chain_shown(body) == [f"- Alice: {SIDE[2]}"]
        assert single_reads(discord_fake) == [early[1]["id"]]  # and nothing past it


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
async def test_a_link_whose_read_fails_ends_the_chain_and_the_reply_still_comes(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI, fault: Fault
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (_, client, _):
        client.chains.fetch_timeout = 0.5  # a hung read, or a 429's wait, ends the chain
        discord_fake.retry_after = 30.0
        early = await side_discussion(discord_fake, SIDE[:2], deliver=False)
        discord_fake.script("GET /channels/{id}/messages/{id}", fault)
        await discord_fake.send_message(W.general, W.alice, mention("so?"),
                                        mentions=[W.bot_user], reply_to=early[-1])
        (reply,) = await posted(discord_fake, W.general)
        assert reply.json["content"].startswith("You said:")
        (body,) = reply_requests(discord_llm)
        cut_short = [f"- Bob: {SIDE[1]}"]
        if fault is Fault.AFTER_RESET:  # aiohttp may send a GET again on a reset connection
            assert chain_shown(body) in (cut_short, [f"- Alice: {SIDE[0]}", *cut_short])
            assert set(single_reads(discord_fake)) == {early[0]["id"]}
        else:
            assert chain_shown(body) == cut_short
            assert single_reads(discord_fake) == [early[0]["id"]]  # not again


async def test_the_chain_is_bounded_in_depth_and_in_fetches(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    texts = [f"heron note {i}" for i in range(12)]
    async with running(make_settings(tmp_path, discord_llm, **SMALL)) as (_, client, _):
        client.chains.depth = 5
        chain = await side_discussion(discord_fake, texts)
        await busy(discord_fake, 120)
        await discord_fake.send_message(W.general, W.bob, mention("depth?"),
                                        mentions=[W.bot_user], reply_to=chain[-1])
        await posted(discord_fake, W.general)
        assert [line.split(": ", 1)[1] for line in chain_shown(
            reply_requests(discord_llm)[-1])] == texts[-5:]

        client.chains.depth, client.chains.fetches = 25, 2
        away = await side_discussion(discord_fake, texts, deliver=False)
        await discord_fake.send_message(W.general, W.bob, mention("fetches?"),
                                        mentions=[W.bot_user], reply_to=away[-1])
        await posted(discord_fake, W.general, 2)
        assert len(single_reads(discord_fake)) == 2
        # each fetch brings the message it replies to with it (as Discord sends it)
        shown = [line.split(": ", 1)[1] for line in chain_shown(reply_requests(discord_llm)[-1])]
        assert shown == texts[-len(shown):] and 4 <= len(shown) < len(texts)
