"""``/catchup`` and ``/digest`` on Discord, through a real discord.py client against the
loopback Discord: threads included, every link a jump URL to a stored message of the
channel (or its thread) inside the period, private unless ``public``, Manage Channels for
digests, and a scheduled digest posted in the channel."""

from __future__ import annotations

import re
import time
from pathlib import Path

from bot.app import Runtime
from bot.stores.digests import DigestSchedule
from memory.models import ChannelKey, Turn
from tests.fakes.discord_server import EVERYONE_PERMISSIONS, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.catchup import links_in
from tests.harness.discord import GENERAL, W, followup_to, has_turns, make_settings, running

THREAD = ChannelKey("discord", str(W.guild_id), str(W.thread))
JUMP = re.compile(r"^https://discord\.com/channels/(\d+)/(\d+)/(\d+)$")
MANAGE_CHANNELS = 1 << 4


async def resolve(rt: Runtime, link: str, keys: list[ChannelKey], start: float,
                  end: float) -> Turn:
    """The stored turn a jump URL points to; fails unless it is in ``keys`` and the period."""
    m = JUMP.match(link)
    assert m, link
    key = ChannelKey("discord", m.group(1), m.group(2))
    assert key in keys, f"{link}: another channel"
    found = [t for t in await rt.store.turns(key) if t.message_id == m.group(3)]
    assert found, f"{link}: no stored message"
    assert start <= found[0].sent_at <= end, f"{link}: outside the period"
    return found[0]


async def test_catchup_covers_threads_and_links_resolve(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        start = time.time() - 5
        await discord_fake.send_message(W.general, W.alice, "release v2.4.0 is tagged")
        await discord_fake.send_message(W.general, W.bob, "order ORD-5521 waits for it")
        await discord_fake.send_message(W.thread, W.alice, "rollback plan RB-7 is ready")
        await watch.until(lambda: has_turns(rt, 2))
        await watch.until(lambda: has_turns(rt, 1, THREAD))
        discord_llm.responder = lambda body: (  # cites message 1, 3 and an invented 9
            "- Release v2.4.0 is tagged [1]\n- Rollback plan RB-7 [3, 9]\n- Made up [12]")

        inter = await discord_fake.interaction(
            "catchup", invoker=W.bob, channel_id=W.general, options={"since": "1h"})
        followup = await followup_to(discord_fake, inter)
        text = followup.json["content"]
        assert followup.json["flags"] & 64  # only the caller sees it
        assert "3 messages (1 in 1 thread)" in text
        links = links_in(text)
        assert len(links) == 2 and "Made up" not in text
        cited = [await resolve(rt, link, [GENERAL, THREAD], start, time.time()) for link in links]
        assert [t.text for t in cited] == ["release v2.4.0 is tagged",
                                           "rollback plan RB-7 is ready"]
        assert "Most active: Alice (2), Bob (1)" in text

        public = await discord_fake.interaction(
            "catchup", invoker=W.bob, channel_id=W.general, options={"public": True})
        shown = await followup_to(discord_fake, public)
        assert not shown.json.get("flags", 0) & 64
        assert "since your last message" in shown.json["content"]  # Bob posted before


async def test_digest_needs_manage_channels(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _watch):
        cases = [  # (permissions, options, allowed)
            (EVERYONE_PERMISSIONS, {"schedule": "daily 09:00"}, False),
            (EVERYONE_PERMISSIONS, {"schedule": "off"}, False),
            (EVERYONE_PERMISSIONS, {"schedule": "now"}, False),
            (EVERYONE_PERMISSIONS | MANAGE_CHANNELS, {"schedule": "daily 09:00 Asia/Seoul"}, True),
            (EVERYONE_PERMISSIONS | (1 << 3), {"schedule": "weekly mon 08:30"}, True),  # admin
            (EVERYONE_PERMISSIONS, {}, True),  # showing the schedule is for anyone
        ]
        for perms, options, allowed in cases:
            inter = await discord_fake.interaction(
                "digest", invoker=W.alice, channel_id=W.general, permissions=perms,
                options=options)
            content = (await followup_to(discord_fake, inter)).json["content"]
            assert ("Manage Channels" not in content) == allowed, (options, content)
        schedule = await rt.storage.digests.digest_schedule(GENERAL)
        assert schedule is not None and (schedule.every, schedule.weekday) == ("weekly", 0)


async def test_scheduled_digest_is_posted_in_the_channel_with_links(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "deploy window is 14:00-15:00 UTC")
        await watch.until(lambda: has_turns(rt, 1))
        discord_llm.responder = lambda body: "- The deploy window [1]"
        now = time.time()
        slot_minute = int((now % 86400) // 60 + 2) % 1440  # a slot two minutes ahead, UTC
        await rt.storage.digests.set_digest_schedule(
            DigestSchedule(GENERAL, "daily", -1, slot_minute, "UTC", now - 86400 * 2))
        digests = rt.features.catchup_commands.digests
        assert digests is not None
        digests.clock = lambda: now + 181
        before = len(discord_fake.sent_to(W.general))
        assert await digests.tick() == 1
        assert await digests.tick() == 0  # claimed: never twice
        posts = discord_fake.sent_to(W.general)[before:]
        assert len(posts) == 1 and "Daily digest" in posts[0].json["content"]
        [link] = links_in(posts[0].json["content"])
        await resolve(rt, link, [GENERAL], now - 86400 * 2, now + 181)


async def test_a_digest_in_a_thread_posts_a_heading_and_the_points_under_it(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "invoice INV-7781 was paid")
        await watch.until(lambda: has_turns(rt, 1))
        discord_llm.responder = lambda body: "- INV-7781 was paid [1]"
        inter = await discord_fake.interaction(
            "digest", invoker=W.alice, channel_id=W.general,
            permissions=EVERYONE_PERMISSIONS | MANAGE_CHANNELS,
            options={"schedule": "daily 09:00 UTC thread"})
        assert "in a thread" in (await followup_to(discord_fake, inter)).json["content"]
        schedule = await rt.storage.digests.digest_schedule(GENERAL)
        assert schedule is not None and schedule.in_thread
        now = time.time()
        minute = int((now % 86400) // 60 + 2) % 1440
        await rt.storage.digests.set_digest_schedule(
            DigestSchedule(GENERAL, "daily", -1, minute, "UTC", now - 86400 * 2, "", True))
        digests = rt.features.catchup_commands.digests
        assert digests is not None
        digests.clock = lambda: now + 181
        before = len(discord_fake.sent_to(W.general))
        assert await digests.tick() == 1
        [heading, create] = discord_fake.sent_to(W.general)[before:]  # prefix match
        assert heading.json["content"].startswith("**Daily digest**")
        assert create.path.endswith("/threads") and create.json["name"].startswith("Daily")
        thread_id = int(create.path.split("/")[4])
        [body] = discord_fake.sent_to(thread_id)
        [link] = links_in(body.json["content"])
        assert (await resolve(rt, link, [GENERAL], now - 86400 * 2, now + 181)).text == (
            "invoice INV-7781 was paid")
