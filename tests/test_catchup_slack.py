"""``/catchup`` and ``/digest`` on Slack, through the real slack-bolt app over HTTP: thread
replies included, every link a permalink to a stored message of the channel inside the
period (``chat.getPermalink``, cached; built from the workspace URL when it fails), private
unless ``public``, digests for admins, owners and ``SLACK_ADMIN_USER_IDS``."""

from __future__ import annotations

import re
import time

import pytest

from bot.stores.digests import DigestSchedule
from memory.models import Turn
from tests.fakes.slack_api import api_error
from tests.harness.catchup import links_in
from tests.harness.slack import KEY, Harness, mention

PERMALINK = re.compile(r"^https://fake\.slack\.test/archives/(C\w+)/p(\d{10})(\d{6})$")


def ts(offset: float) -> str:
    return f"{time.time() + offset:.6f}"


async def conversation(h: Harness) -> list[str]:
    """Three messages, the last a thread reply; returns their ts."""
    stamps = [ts(-30), ts(-20), ts(-10)]
    await h.event(mention("release v2.4.0 is tagged", kind="message", ts=stamps[0]),
                  event_id="E1")
    await h.event(mention("order ORD-5521 waits", user="U2", kind="message", ts=stamps[1]),
                  event_id="E2")
    await h.event(mention("rollback plan RB-7 ready", user="U3", kind="message", ts=stamps[2],
                          thread_ts=stamps[0]), event_id="E3")
    await h.settle()
    return stamps


async def resolve(h: Harness, link: str, start: float, end: float) -> Turn:
    m = PERMALINK.match(link)
    assert m, link
    assert m.group(1) == KEY.channel, f"{link}: another channel"
    ts_ = f"{m.group(2)}.{m.group(3)}"
    found = [t for t in await h.turns() if t.message_id == ts_]
    assert found, f"{link}: no stored message"
    assert start <= found[0].sent_at <= end, f"{link}: outside the period"
    return found[0]


async def test_catchup_links_are_permalinks_to_stored_messages_threads_included(
    h: Harness,
) -> None:
    start = time.time() - 60
    await conversation(h)
    h.llm.digest = "- Release v2.4.0 [1]\n- Rollback plan RB-7 in the thread [3]\n- ORD-9999 [2]"
    await h.command("/catchup", user="U2", text="1h")
    [call] = await h.fake.wait_for("response_url:catchup")
    text = call.params["text"]
    assert call.params["response_type"] == "ephemeral"
    assert "3 messages" in text and "ORD-9999" not in text  # not in message 2
    links = links_in(text)
    cited = [await resolve(h, link, start, time.time()) for link in links]
    assert [t.text for t in cited] == ["release v2.4.0 is tagged", "rollback plan RB-7 ready"]
    asked = len(h.fake.calls_to("chat.getPermalink"))
    assert asked == 2
    await h.command("/catchup", user="U2", text="1h public")
    [_, again] = await h.fake.wait_for("response_url:catchup", 2)
    assert again.params["response_type"] == "in_channel"
    assert len(h.fake.calls_to("chat.getPermalink")) == asked  # cached


async def test_a_failed_permalink_call_falls_back_to_a_built_link(h: Harness) -> None:
    start = time.time() - 60
    await conversation(h)
    h.llm.digest = "- Release v2.4.0 [1]"
    h.fake.script("chat.getPermalink", api_error("ratelimited"))
    await h.command("/catchup", user="U1", text="1h")
    [call] = await h.fake.wait_for("response_url:catchup")
    [link] = links_in(call.params["text"])
    assert (await resolve(h, link, start, time.time())).text == "release v2.4.0 is tagged"


@pytest.mark.parametrize(("user", "allowed"), [
    ("U1", False),    # a member
    ("U2", True),     # a workspace admin
    ("U3", True),     # the owner
    ("UCONF", True),  # SLACK_ADMIN_USER_IDS
])
async def test_digest_permission_matrix(h: Harness, user: str, allowed: bool) -> None:
    for n, text in enumerate(["daily 09:00 Europe/Berlin", "now", "off"], 1):
        await h.command("/digest", user=user, text=text)
        calls = await h.fake.wait_for("response_url:digest", n)
        refused = "Only workspace admins and owners" in calls[-1].params["text"]
        assert refused != allowed, (user, text, calls[-1].params["text"])
        public = text == "now" and allowed
        assert calls[-1].params["response_type"] == ("in_channel" if public else "ephemeral")
    await h.command("/digest", user="U1")  # anyone may see the schedule
    calls = await h.fake.wait_for("response_url:digest", 4)
    assert "No digest is scheduled here" in calls[-1].params["text"]


async def test_scheduled_digest_posts_once_in_the_channel(h: Harness) -> None:
    await conversation(h)
    h.llm.digest = "- Release v2.4.0 [1]\n- RB-7 [3]"
    now = time.time()
    minute = int((now % 86400) // 60 + 2) % 1440
    await h.rt.storage.digests.set_digest_schedule(
        DigestSchedule(KEY, "daily", -1, minute, "UTC", now - 3 * 86400))
    digests = h.rt.features.catchup_commands.digests
    assert digests is not None
    digests.clock = lambda: now + 181
    assert await digests.tick() == 1
    assert await digests.tick() == 0
    posts = [c.params for c in h.fake.calls_to("chat.postMessage")
             if "Daily digest" in str(c.params.get("text"))]
    assert len(posts) == 1 and posts[0]["channel"] == KEY.channel
    for link in links_in(posts[0]["text"]):
        await resolve(h, link, now - 86400, now + 181)


async def test_a_digest_in_a_thread_replies_under_its_heading(h: Harness) -> None:
    await conversation(h)
    h.llm.digest = "- Release v2.4.0 [1]"
    await h.command("/digest", user="U2", text="weekly mon 09:00 Asia/Seoul thread")
    [call] = await h.fake.wait_for("response_url:digest")
    assert "Weekly digest on mondays at 09:00 (Asia/Seoul), in a thread" in call.params["text"]
    now = time.time()
    minute = int((now % 86400) // 60 + 2) % 1440
    await h.rt.storage.digests.set_digest_schedule(
        DigestSchedule(KEY, "daily", -1, minute, "UTC", now - 3 * 86400, "", True))
    digests = h.rt.features.catchup_commands.digests
    assert digests is not None
    digests.clock = lambda: now + 181
    assert await digests.tick() == 1
    heading, body = [c for c in h.fake.calls_to("chat.postMessage")][-2:]
    assert heading.params["text"].startswith("*Daily digest*")
    assert not heading.params.get("thread_ts")
    assert body.params["thread_ts"] and body.params["thread_ts"] != ""
    [link] = links_in(body.params["text"])
    await resolve(h, link, now - 86400, now + 181)
