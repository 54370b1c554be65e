"""Fifty hostile files shared on Discord (real discord.py against the loopback Discord,
whose CDN serves them): zip and gzip bombs, 100-megapixel and broken images, PDFs with
loops, binaries with text content types, URLs to other hosts, oversized, failing and
stalled downloads. Each ends as one line in its message's turn, nothing crashes, the
message's own words and a good file shared alongside are kept, and the bot still answers."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, content_text
from tests.harness.discord import W, make_settings, mention, posted, running, turns
from tests.harness.hostile import hostile_files, untagged

MAX_BYTES = 1 << 20
NOTE = re.compile(r"^\[attachment: [^\n\[\]]+, [^\n\[\]]+\]$")


async def test_fifty_hostile_files_each_become_one_line_and_nothing_else_is_lost(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    hostile = hostile_files(MAX_BYTES)
    settings = make_settings(tmp_path, discord_llm, ATTACHMENT_MAX_BYTES=str(MAX_BYTES),
                             ATTACHMENT_TIMEOUT="2")
    async with running(settings) as (rt, _, _watch):
        for i, h in enumerate(hostile):
            att = discord_fake.attachment(h.name, h.data, h.content_type, size=h.size, url=h.url,
                                          **h.how)
            await discord_fake.send_message(W.general, W.alice, f"hostile {i}", attachments=[att])
        good = discord_fake.attachment("ok.txt", b"the good file says PK-2210", "text/plain")
        await discord_fake.send_message(W.general, W.bob, mention("still there?"),
                                        mentions=[W.bot_user], attachments=[good])
        await posted(discord_fake, W.general)
        async with asyncio.timeout(30):  # every file read or refused, every turn edited
            await rt.features.attachments.idle()
        stored = [t for t in await turns(rt) if t[0] == "user"]
        assert len(stored) == 51
        by_text = {t.split("\n", 1)[0]: t for _, _, t in stored}
        for i, h in enumerate(hostile):
            lines = by_text[f"hostile {i}"].split("\n")
            assert len(lines) == 2 and NOTE.match(lines[1]), (h.why, lines)
            if h.url is not None:
                assert "file host" in lines[1], (h.why, lines)
        assert "declared too large" in {h.why for h in hostile}
        big = next(h for h in hostile if h.why == "declared too large")
        assert not any(path.endswith(f"/{big.name}") for path, _ in discord_fake.files.fetched)
        assert untagged(by_text["@gistbot still there?"]).endswith(
            "[attachment: ok.txt]\nthe good file says PK-2210\n[end of attachment: ok.txt]")
        (reply,) = [r for r in discord_llm.chat_requests
                    if "still there?" in content_text(r.json["messages"][-1]["content"])]
        assert "PK-2210" in content_text(reply.json["messages"][-1]["content"])


async def test_a_bug_while_reading_files_costs_the_files_not_the_message_or_its_reply(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_: object) -> str:
        raise RuntimeError("a bug in composing")

    monkeypatch.setattr("bot.attachments.intake.compose", broken)
    att = discord_fake.attachment("notes.txt", b"some notes")
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _watch):
        await discord_fake.send_message(W.general, W.alice, mention("read this"),
                                        mentions=[W.bot_user], attachments=[att])
        (reply,) = await posted(discord_fake, W.general)
        assert reply.json["content"].startswith("You said:")
        assert (await turns(rt))[0][2] == "@gistbot read this\n[attachment: notes.txt]"
