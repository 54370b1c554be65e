"""Visibility on Slack, through the real slack-bolt app over HTTP: a ``/catchup``, a
``/digest now`` and a scheduled digest of a channel rest on that channel's messages (its
thread replies included) and never on another channel's, a private channel's or a DM's —
neither in the answer, nor in its links, nor in what the model is shown."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import pytest

from bot.llm.client import Completion, Usage
from bot.stores.digests import DigestSchedule
from memory.completion import ChatMessage
from tests.fakes.models import Call
from tests.harness.catchup import citing_answer, links_in
from tests.harness.slack import KEY, FakeLLM, Harness, mention

OTHERS = {"ORD-2": "order ORD-2 in another channel", "TR-3": "thread reply TR-3 over there",
          "PC-4": "private channel secret PC-4", "DM-5": "a direct message DM-5"}


class CitingLLM(FakeLLM):
    """A catch-up model that cites every message it is shown, and keeps its prompts."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[str] = []

    async def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int,
                       purpose: str, model: str | None = None) -> Completion:
        if purpose != "digest":
            return await super().complete(messages, max_tokens=max_tokens, purpose=purpose,
                                          model=model)
        self.shown.extend(m["content"] for m in messages)
        text = citing_answer(Call(list(messages), max_tokens, purpose), per_call=20)
        return Completion(text, Usage(), self.name)


@pytest.fixture
def llm() -> FakeLLM:
    return CitingLLM()


def ts(offset: float) -> str:
    return f"{time.time() + offset:.6f}"


async def everywhere(h: Harness) -> None:
    """C1 says two things (one a thread reply); another channel, a private channel and a
    DM say theirs."""
    first = ts(-50)
    events = [
        mention("release RL-1 is tagged", kind="message", ts=first),
        mention("rollback RB-1 in the thread", user="U2", kind="message", ts=ts(-45),
                thread_ts=first),
        mention(OTHERS["ORD-2"], channel="C2", kind="message", ts=ts(-40)),
        mention(OTHERS["TR-3"], channel="C2", kind="message", ts=ts(-35), thread_ts=ts(-40)),
        mention(OTHERS["PC-4"], channel="G9", kind="message", ts=ts(-30), channel_type="group"),
        mention(OTHERS["DM-5"], channel="D1", kind="message", ts=ts(-25)),
    ]
    for n, event in enumerate(events):
        await h.event(event, event_id=f"E{n}")
    await h.settle()
    assert len(await h.turns()) == 2
    for channel, said in (("C2", 2), ("G9", 1), ("D1", 1)):  # all remembered, elsewhere
        stored = [t for t in await h.turns(replace(KEY, channel=channel)) if t.role == "user"]
        assert len(stored) == said, channel


def only_this_channel(h: Harness, text: str) -> None:
    """``text`` rests on C1's two messages and on nothing else, and so did the prompts."""
    assert "RL-1" in text and "RB-1" in text
    shown = "\n".join(h.llm.shown)  # type: ignore[attr-defined]
    for ident, said in OTHERS.items():
        assert ident not in text and ident not in shown, said
    for link in links_in(text):
        assert f"/archives/{KEY.channel}/" in link, link


async def test_a_catchup_of_a_channel_shows_nothing_of_other_channels_or_dms(
    h: Harness,
) -> None:
    await everywhere(h)
    await h.command("/catchup", user="U1", text="1h")
    [private] = await h.fake.wait_for("response_url:catchup")
    only_this_channel(h, private.params["text"])
    await h.command("/catchup", user="U1", text="1h public")
    [_, public] = await h.fake.wait_for("response_url:catchup", 2)
    assert public.params["response_type"] == "in_channel"
    only_this_channel(h, public.params["text"])


async def test_digests_of_a_channel_show_nothing_of_other_channels_or_dms(h: Harness) -> None:
    await everywhere(h)
    await h.command("/digest", user="U2", text="now")
    [now_post] = await h.fake.wait_for("response_url:digest")
    only_this_channel(h, now_post.params["text"])

    now = time.time()
    minute = int((now % 86400) // 60 + 2) % 1440
    await h.rt.storage.digests.set_digest_schedule(
        DigestSchedule(KEY, "daily", -1, minute, "UTC", now - 3 * 86400))
    digests = h.rt.features.catchup_commands.digests
    assert digests is not None
    digests.clock = lambda: now + 181
    assert await digests.tick() == 1
    [post] = [c.params for c in h.fake.calls_to("chat.postMessage")
              if "Daily digest" in str(c.params.get("text"))]
    assert post["channel"] == KEY.channel
    only_this_channel(h, post["text"])
