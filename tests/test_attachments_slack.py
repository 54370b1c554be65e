"""Attachments on Slack: the real slack-bolt app over HTTP against the loopback Slack, whose
``url_private`` serves files to the bot token only, and the real openai SDK against the
OpenAI fake. A shared file's text joins its message's turn and is recalled a thousand turns
on; an image reaches a vision model as an image part; the token goes to Slack's host only."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.attachments.describe import DESCRIBE_PROMPT
from memory.models import NewTurn
from tests.fakes.openai_server import (
    FakeOpenAI,
    Request,
    content_text,
    default_responder,
    image_parts,
    is_summary_request,
)
from tests.harness.hostile import pdf_with_text, png, untagged
from tests.harness.slack import KEY, Harness, mention, open_harness

CONFIG = b"region: eu-west-3\ndeploy_token: QX-7741-ZB\n"


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(responder=default_responder, models=("gpt-4o", "gpt-test")) as fake:
        yield fake


def replies(fake: FakeOpenAI) -> list[Request]:
    """The reply requests (not summaries, not image descriptions)."""
    return [r for r in fake.chat_requests if not is_summary_request(r.json or {})
            and DESCRIBE_PROMPT not in content_text(r.json["messages"][0]["content"])]


def shared(text: str, ts: str, *files: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A ``file_share`` message event in C1."""
    return mention(text, ts=ts, kind="message", subtype="file_share", files=list(files),
                   **extra)


async def texts(h: Harness) -> list[str]:
    return [t.text for t in await h.turns()]


async def test_a_shared_file_is_read_with_the_bot_token_and_kept_a_thousand_turns(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-test", "LLM_MAX_RETRIES": "0"}
    async with open_harness(tmp_path, None, env) as h:
        f = h.fake.file("deploy.yaml", CONFIG, "text/plain")
        assert await h.event(shared("our deploy settings", "1700000001.000100", f)) == 200
        await h.settle()
        await asyncio.wait_for(h.rt.features.attachments.idle(), 10)
        gutter = "".join(f"│ {line}\n" for line in CONFIG.decode().strip().split("\n"))
        assert [untagged(t) for t in await texts(h)] == [
            "our deploy settings\n[attachment: deploy.yaml]\n" + gutter
            + "[end of attachment: deploy.yaml]"]
        ((_, headers),) = h.fake.files.fetched
        assert headers["Authorization"] == "Bearer xoxb-test-token"
        tok = h.rt.memory.tokenizer
        for i in range(1000):
            text = f"lunch plan {i} sounds fine to me"
            await h.rt.memory.record(NewTurn(KEY, f"filler{i}", "user", "U2", "Bob", text,
                                             tok.count(text), 1_800_000_000.0 + i))
        ask = mention("<@UBOT> what was the deploy_token in the deploy settings?",
                      ts="1800000999.000100", user="U2")
        assert await h.event(ask, event_id="Ev2") == 200
        await h.settle()
        (reply,) = replies(model)
        prompt = "\n".join(content_text(m["content"]) for m in reply.json["messages"])
        assert "QX-7741-ZB" in prompt


async def test_a_pdf_is_read_and_a_file_without_the_token_is_not(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-test"}
    async with open_harness(tmp_path, None, env) as h:
        good = h.fake.file("report.pdf", pdf_with_text("Quarterly total 88412"),
                           "application/pdf")
        locked = h.fake.file("locked.txt", b"secret", "text/plain", token="xoxb-other")
        assert await h.event(shared("two files", "1700000001.000100", good, locked)) == 200
        await h.settle()
        await asyncio.wait_for(h.rt.features.attachments.idle(), 10)
        (text,) = await texts(h)
        assert "Quarterly total 88412" in text
        assert text.endswith("[attachment: locked.txt, not fetched: the file host answered 403]")


async def test_an_image_in_the_message_answered_reaches_a_vision_model(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-4o"}
    picture = png(300, 200)
    async with open_harness(tmp_path, None, env) as h:
        f = h.fake.file("screen.png", picture, "image/png")
        event = shared("<@UBOT> what does this screen say?", "1700000001.000100", f)
        assert await h.event(event) == 200
        await h.settle()
        (request,) = replies(model)
        (part,) = image_parts(request.json)
        assert base64.b64decode(part["image_url"]["url"].split(",", 1)[1]) == picture
        last = content_text(request.json["messages"][-1]["content"])
        assert "[image: screen.png, 300×200]" in last


async def test_a_file_elsewhere_or_too_large_is_a_line_and_the_token_goes_nowhere_else(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-test",
           "ATTACHMENT_MAX_BYTES": "1000"}
    async with FakeOpenAI() as elsewhere:  # another server on loopback, another port
        async with open_harness(tmp_path, None, env) as h:
            away = h.fake.file("away.txt", b"x", url=f"{elsewhere.base_url}/away.txt")
            big = h.fake.file("big.log", b"y" * 1001)
            broken = h.fake.file("scan.pdf", b"%PDF-1.4 broken", "application/pdf")
            assert await h.event(shared("three", "1700000001.000100", away, big, broken)) == 200
            await h.settle()
            await asyncio.wait_for(h.rt.features.attachments.idle(), 10)
            assert await texts(h) == ["\n".join([
                "three",
                "[attachment: away.txt, not fetched: not on slack's file host]",
                "[attachment: big.log, not fetched: larger than the 1000 bytes limit]",
                "[attachment: scan.pdf, unreadable]"])]
            assert elsewhere.requests == []
            assert [path.rsplit("/", 1)[-1] for path, _ in h.fake.files.fetched] == ["scan.pdf"]
