"""Attachments on Discord: a real discord.py client against the loopback Discord, whose CDN
serves the files, the real service on SQLite and the real openai SDK against the OpenAI
fake. A text file's words join its message's turn (before the reply when they arrive in
time, by an edit of the turn when later) and are recalled a thousand turns on; an image
reaches a vision model as an image part, never a model without vision, and the request
stays within the budget either way."""

from __future__ import annotations

import asyncio
import base64
import re
from pathlib import Path
from typing import Any

import pytest

from bot.app import Runtime
from bot.attachments.describe import DESCRIBE_PROMPT
from bot.attachments.vision import image_tokens
from memory.models import NewTurn
from memory.tokens import TokenCounter
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import (
    FakeOpenAI,
    Request,
    content_text,
    default_responder,
    image_parts,
    is_summary_request,
)
from tests.harness.discord import GENERAL, W, make_settings, mention, posted, running, turns
from tests.harness.hostile import png, untagged

CONFIG = b"region: eu-west-3\ndeploy_token: QX-7741-ZB\nreplicas: 3\n"


async def until_stored(rt: Runtime, needle: str, within: float = 10.0
                       ) -> list[tuple[str, str, str]]:
    """The turns once one of them holds ``needle`` (a background edit has landed)."""
    async with asyncio.timeout(within):
        while True:
            found = await turns(rt)
            if any(needle in text for _, _, text in found):
                return found
            await asyncio.sleep(0.02)


async def test_a_text_attachment_is_read_into_its_turn_before_the_reply(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.push("Noted.")
    att = discord_fake.attachment("deploy.yaml", CONFIG, "application/x-yaml")
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _watch):
        await discord_fake.send_message(W.general, W.alice, mention("check this config"),
                                        mentions=[W.bot_user], attachments=[att])
        await posted(discord_fake, W.general)
        (request,) = discord_llm.chat_requests
        assert "deploy_token: QX-7741-ZB" in content_text(request.json["messages"][-1]["content"])
        role, name, text = (await turns(rt))[0]
        gutter = "".join(f"│ {line}\n" for line in CONFIG.decode().strip().split("\n"))
        assert (role, name, untagged(text)) == ("user", "Alice", "@gistbot check this config\n"
                                                "[attachment: deploy.yaml]\n" + gutter
                                                + "[end of attachment: deploy.yaml]")
        (fetched, _), = discord_fake.files.fetched  # from the fake's CDN, once
        assert fetched.endswith("/deploy.yaml")


async def test_the_turn_is_stored_at_once_and_a_late_file_edits_it_in(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    release = asyncio.Event()
    att = discord_fake.attachment("boot.log", b"boot failed with E-5521", release=release)
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.bob, "here is the log", attachments=[att])
        await watch.until(lambda: _has(rt, "here is the log"))
        assert await turns(rt) == [("user", "Bob", "here is the log\n[attachment: boot.log]")]
        release.set()
        stored = [(r, n, untagged(t)) for r, n, t in await until_stored(rt, "E-5521")]
        assert stored == [("user", "Bob", "here is the log\n[attachment: boot.log]\n"
                                          "boot failed with E-5521\n[end of attachment: boot.log]")]


def describing(body: dict[str, Any]) -> bool:
    """Whether a chat request asks for an image's description."""
    return DESCRIBE_PROMPT in content_text(body["messages"][0]["content"])


def replies(fake: FakeOpenAI) -> list[Request]:
    """The reply requests the model got (not the summaries' or descriptions')."""
    return [r for r in fake.chat_requests
            if not is_summary_request(r.json or {}) and not describing(r.json or {})]


async def _has(rt: Runtime, text: str) -> bool:
    return any(text in t for _, _, t in await turns(rt))


async def test_a_file_shared_a_thousand_turns_ago_is_in_the_prompt_when_asked_about(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    att = discord_fake.attachment("deploy.yaml", CONFIG, "text/plain")
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _watch):
        await discord_fake.send_message(W.general, W.alice, "our deploy settings",
                                        attachments=[att])
        await until_stored(rt, "QX-7741-ZB")
        tok = rt.memory.tokenizer
        for i in range(1000):
            text = f"lunch plan {i} sounds fine to me"
            await rt.memory.record(NewTurn(GENERAL, f"filler{i}", "user", str(W.bob["id"]),
                                           "Bob", text, tok.count(text), 1_800_000_000.0 + i))
        await discord_fake.send_message(
            W.general, W.bob, mention("what was the deploy_token in the deploy settings?"),
            mentions=[W.bot_user])
        await posted(discord_fake, W.general)
        (reply,) = replies(discord_llm)
        prompt = "\n".join(content_text(m["content"]) for m in reply.json["messages"])
        assert "QX-7741-ZB" in prompt
        assert len(await rt.store.turns(GENERAL, limit=5000)) >= 1002


def _prompt_tokens(messages: list[dict], tok: TokenCounter) -> int:  # type: ignore[type-arg]
    text = sum(tok.count(content_text(m["content"])) + 4 for m in messages)
    return text + sum(image_tokens(*_size(p), p["image_url"]["detail"])
                      for m in messages if isinstance(m["content"], list)
                      for p in m["content"] if p["type"] == "image_url")


def _size(part: dict) -> tuple[int, int]:  # type: ignore[type-arg]
    from io import BytesIO

    from PIL import Image

    data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
    with Image.open(BytesIO(data)) as img:
        return img.size


@pytest.mark.parametrize("vision", ["auto", "off"])
async def test_an_image_reaches_a_vision_model_as_an_image_part_within_the_budget(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI, vision: str
) -> None:
    picture = png(1200, 900)
    att = discord_fake.attachment("error.png", picture, "image/png")
    settings = make_settings(tmp_path, discord_llm, MODEL_NAME="gpt-4o", CONTEXT_TOKENS="4000",
                             VISION=vision)
    async with running(settings) as (rt, _, _watch):
        for i in range(60):  # enough conversation to fill the budget
            text = f"status update {i}: " + "the build is still running and the queue is long " * 3
            await rt.memory.record(NewTurn(GENERAL, f"f{i}", "user", "1", "Bob", text,
                                           rt.memory.tokenizer.count(text), 1_800_000_000.0 + i))
        await discord_fake.send_message(W.general, W.alice, mention("what is on this screen?"),
                                        mentions=[W.bot_user], attachments=[att])
        await posted(discord_fake, W.general)
        (request,) = replies(discord_llm)
        if vision == "off":
            assert image_parts(request.json) == []
        else:
            (part,) = image_parts(request.json)
            assert base64.b64decode(part["image_url"]["url"].split(",", 1)[1]) == picture
            assert part["image_url"]["url"].startswith("data:image/png;base64,")
        last = content_text(request.json["messages"][-1]["content"])
        # the image's line, described or not yet (its description may land first on a busy
        # machine: both are what the reply may show)
        assert re.search(r"\[image: error\.png, 1200×900(?:: [^\]]+)?\]", last), last
        used = _prompt_tokens(request.json["messages"], rt.memory.tokenizer)
        assert used + settings.budget.reply_tokens <= settings.budget.context_tokens
        assert used > settings.budget.context_tokens // 2  # the conversation did fill it
        assert "\n[image: error.png, 1200×900" in (await turns(rt))[-2][2]


@pytest.mark.parametrize("env", [{"MODEL_NAME": "gpt-test"},
                                 {"MODEL_NAME": "gpt-4o", "VISION": "off"}])
async def test_without_vision_an_image_is_a_line_with_its_size_and_never_an_image_part(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI, env: dict[str, str]
) -> None:
    att = discord_fake.attachment("error.png", png(640, 480), "image/png")
    async with running(make_settings(tmp_path, discord_llm, **env)) as (rt, _, _watch):
        await discord_fake.send_message(W.general, W.alice, mention("look"),
                                        mentions=[W.bot_user], attachments=[att])
        await posted(discord_fake, W.general)
        (request,) = replies(discord_llm)
        assert image_parts(request.json) == []
        last = request.json["messages"][-1]["content"]
        assert isinstance(last, str) and re.search(r"\[image: error\.png, 640×480\]$", last)
        assert (await turns(rt))[0][2] == "@gistbot look\n[image: error.png, 640×480]"


async def test_an_edited_message_keeps_its_files_text_and_long_files_are_cut_with_a_marker(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    body = b"".join(b"line %d of the build log\n" % i for i in range(100))
    att = discord_fake.attachment("build.log", body, "text/plain")
    settings = make_settings(tmp_path, discord_llm, ATTACHMENT_MAX_CHARS="200")
    async with running(settings) as (rt, _, watch):
        sent = await discord_fake.send_message(W.general, W.alice, "the log", attachments=[att])
        await until_stored(rt, "more characters not kept")
        ((_, _, text),) = await turns(rt)
        kept = body.decode()[:200]
        assert untagged(text) == (f"the log\n[attachment: build.log]\n{kept}\n[…attachment cut: "
                        f"{len(body.decode().strip()) - 200:,} more characters not kept]\n"
                        "[end of attachment: build.log]")
        await discord_fake.edit_message(sent, "the boot log")
        await watch.until(lambda: _has(rt, "the boot log"))
        assert (await turns(rt))[0][2] == text.replace("the log", "the boot log", 1)


def describer(body: dict[str, Any]) -> str:
    """The default answers, and a fixed description for a description request."""
    if describing(body):
        assert image_parts(body), "a description request without the image"
        return "A terminal [red] showing\nerror E-9123 after the deploy."
    return default_responder(body)


@pytest.mark.parametrize("vision", ["auto", "off"])
async def test_an_image_is_described_once_and_the_description_is_remembered(
    tmp_path: Path, discord_fake: FakeDiscord, vision: str
) -> None:
    att = discord_fake.attachment("error.png", png(640, 480), "image/png")
    async with FakeOpenAI(responder=describer) as model:
        settings = make_settings(tmp_path, model, MODEL_NAME="gpt-4o", VISION=vision)
        async with running(settings) as (rt, _, watch):
            await discord_fake.send_message(W.general, W.alice, "after the deploy",
                                            attachments=[att])
            await watch.until(lambda: _has(rt, "after the deploy"))
            await asyncio.wait_for(rt.features.attachments.idle(), 10)
            ((_, _, text),) = await turns(rt)
            asks = [r for r in model.chat_requests if describing(r.json or {})]
            if vision == "off":
                assert asks == [] and text == "after the deploy\n[image: error.png, 640×480]"
                return
            assert len(asks) == 1
            assert text == ("after the deploy\n[image: error.png, 640×480: A terminal (red) "
                            "showing error E-9123 after the deploy.]")
            await discord_fake.send_message(W.general, W.bob, mention("which error did alice see?"),
                                            mentions=[W.bot_user])
            await posted(discord_fake, W.general)
            (reply,) = replies(model)
            assert "E-9123" in "\n".join(content_text(m["content"]) for m in reply.json["messages"])
            assert len([r for r in model.chat_requests if describing(r.json or {})]) == 1


async def test_a_file_posted_while_the_connection_was_down_is_read_when_backfilled(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    att = discord_fake.attachment("notes.md", b"# Plan\nship build 7.2.9 on Friday\n")
    async with running(make_settings(tmp_path, discord_llm), backfill=True) as (rt, client, watch):
        await discord_fake.send_message(W.general, W.alice, "live")
        await watch.until(lambda: _has(rt, "live"))
        await discord_fake.send_message(W.general, W.bob, "the plan", attachments=[att],
                                        deliver=False)
        await discord_fake.request_reconnect()
        stored = await until_stored(rt, "7.2.9")
        role, name, text = stored[-1]
        assert (role, name, untagged(text)) == (
            "user", "Bob", "the plan\n[attachment: notes.md]\n# Plan\nship build 7.2.9 on "
            "Friday\n[end of attachment: notes.md]")
        assert client.backfill is not None


async def test_an_image_of_an_earlier_message_is_shown_when_the_budget_leaves_room(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    picture = png(800, 600)
    att = discord_fake.attachment("chart.png", picture, "image/png")
    settings = make_settings(tmp_path, discord_llm, MODEL_NAME="gpt-4o")
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "the chart", attachments=[att])
        await watch.until(lambda: _has(rt, "the chart"))
        await asyncio.wait_for(rt.features.attachments.idle(), 10)
        await discord_fake.send_message(W.general, W.bob, mention("what does the chart show?"),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.general)
        (request,) = replies(discord_llm)
        messages = request.json["messages"]
        with_image = [m for m in messages if isinstance(m["content"], list)]
        assert len(with_image) == 1 and "the chart" in content_text(with_image[0]["content"])
        assert isinstance(messages[-1]["content"], str)  # the question has no image
        (part,) = image_parts(request.json)
        assert base64.b64decode(part["image_url"]["url"].split(",", 1)[1]) == picture
        used = _prompt_tokens(messages, rt.memory.tokenizer)
        assert used + settings.budget.reply_tokens <= settings.budget.context_tokens
