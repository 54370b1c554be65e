"""What the Slack adapter posts: neutralised pings, long replies split in the thread,
rate limits retried, streamed replies paced, and an answer even without a placeholder.
"""

from __future__ import annotations

import itertools

import pytest

from adapters.slack.text import MESSAGE_LIMIT, WORD_JOINER
from tests.fakes.slack_api import api_error, rate_limited
from tests.harness.slack import (
    PLACEHOLDER,
    TS,
    FakeLLM,
    Harness,
    mention,
    posts,
)


async def test_pings_in_model_output_neutralised(h: Harness, llm: FakeLLM) -> None:
    llm.replies.append(
        "**Heads up** <!channel> <!here|here> <!everyone> and <@U123>, "
        "also @here and <!subteam^S1|@devs> — see [the doc](https://x.test/a?b=1&c=2)"
    )
    assert await h.event(mention()) == 200
    text = (await h.fake.wait_for("chat.update"))[0].params["text"]
    for ping in ("<!channel>", "<!here", "<!everyone>", "<@U123>", "<!subteam", "@here"):
        assert ping not in text
    assert f"@{WORD_JOINER}channel" in text and f"@{WORD_JOINER}U123" in text
    assert text.startswith("*Heads up*")
    assert "<https://x.test/a?b=1&amp;c=2|the doc>" in text


async def test_long_reply_split_into_thread_messages(h: Harness, llm: FakeLLM) -> None:
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum dolor " * 30 for i in range(20)]
    llm.replies.append("\n\n".join(paragraphs))
    assert await h.event(mention()) == 200
    await h.fake.wait_for("chat.update")
    await h.settle()
    first = h.fake.calls_to("chat.update")[0].params["text"]
    rest = posts(h.fake)
    messages = [first, *(p["text"] for p in rest)]
    assert len(messages) >= 3
    assert all(len(m) <= MESSAGE_LIMIT for m in messages)
    assert all(p["thread_ts"] == TS for p in rest)
    joined = "\n\n".join(messages)
    positions = [joined.index(f"Paragraph {i}:") for i in range(20)]
    assert positions == sorted(positions)


async def test_rate_limited_post_retried_after_retry_after(h: Harness) -> None:
    h.fake.script("chat.postMessage", rate_limited(retry_after=1))
    assert await h.event(mention()) == 200
    update = (await h.fake.wait_for("chat.update", within=10))[0].params
    first, second = h.fake.calls_to("chat.postMessage")
    assert second.at - first.at >= 1.0
    assert second.params["text"] == PLACEHOLDER
    assert update["ts"] == "1800000000.000001"  # the retried post's placeholder was updated


@pytest.mark.parametrize("env_extra", [{"STREAM_REPLIES": "true"}])
async def test_streamed_reply_updates_at_most_once_per_interval(h: Harness, llm: FakeLLM) -> None:
    llm.default = " ".join(f"w{i}" for i in range(12))
    llm.pause = 0.05  # 0.6 s of streaming against the 0.2 s interval of this harness
    assert await h.event(mention()) == 200
    await h.fake.wait_for("chat.update")
    await h.settle()
    updates = h.fake.calls_to("chat.update")
    assert updates[-1].params["text"] == llm.default
    interim = updates[:-1]
    assert 1 <= len(interim) <= 4
    assert all(u.params["text"].endswith(" …") for u in interim)
    gaps = [b.at - a.at for a, b in itertools.pairwise(interim)]
    assert all(g >= 0.2 for g in gaps)


async def test_failed_post_of_placeholder_still_delivers_answer(h: Harness) -> None:
    h.fake.script("chat.postMessage", api_error("not_in_channel"))
    assert await h.event(mention()) == 200
    await h.settle()
    texts = [c.params["text"] for c in h.fake.calls_to("chat.postMessage")]
    assert texts == [PLACEHOLDER, "Hello from the model."]
    assert h.fake.calls_to("chat.update") == []
