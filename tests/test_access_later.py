"""The access lists as they stand when the bot acts later, not when it was asked: a late
answer by the missed-mention sweep (a mention left unanswered by a crash, or posted while
the bot was down) and a scheduled digest. An operator who blocks a person, a role or a
channel, or turns DMs off, and restarts must not see the bot answer that person or post
there afterwards. Real discord.py and slack-bolt against the loopback fakes; the sweep
the Discord client starts itself.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import discord
import pytest

from adapters.discord.text import channel_key
from adapters.slack.launch import start_answering_missed
from bot.app import Runtime
from bot.stores.digests import DigestSchedule
from bot.stores.owed import ReplyDue
from memory.models import ChannelKey, NewTurn
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, is_summary_request
from tests.harness.deadlines import scaled
from tests.harness.discord import GENERAL, W, has_turns, make_settings, posted, running
from tests.harness.slack import KEY, Harness, posts

THREAD = channel_key(W.guild_id, W.thread)
DM = ChannelKey("discord", "dm", str(W.dm_channel))
SWEEP_OFTEN = {"REPLY_CLAIM_SECONDS": "1.5"}  # the client sweeps every 0.5 s
CAROL, BOB, ALICE = W.carol, W.bob, W.alice


def _failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Errors logged (a digest that broke is not one that was refused)."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def _replies(llm: FakeOpenAI) -> list[Any]:
    return [r for r in llm.chat_requests if r.json is None or not is_summary_request(r.json)]


async def _owe(rt: Runtime, key: ChannelKey, who: dict[str, str]) -> str:
    """A mention by ``who`` in ``key`` recorded while the bot was down (as backfill does):
    its reply owed and claimed by nobody, so the client's next sweep takes it up."""
    mid = str(discord.utils.time_snowflake(discord.utils.utcnow()))
    turn = NewTurn(key, mid, "user", who["id"], who["global_name"],
                   "@gistbot what is the vault code?", 8, time.time())
    await rt.store.record(replace(turn, extra=ReplyDue("", 30.0)))
    return mid


async def _until_settled(db: Path) -> None:
    """Wait (with a deadline) until no reply is owed any more: answered, or dropped."""
    async with asyncio.timeout(scaled(15)):
        while True:
            with sqlite3.connect(db) as conn:
                if conn.execute("SELECT count(*) FROM owed_replies").fetchone()[0] == 0:
                    return
            await asyncio.sleep(0.05)


LATE_REFUSED = [  # (lists now, where the mention was, by whom)
    pytest.param({"BLOCKED_USERS": CAROL["id"]}, W.general, CAROL, id="blocked-user"),
    pytest.param({"BLOCKED_ROLES": str(W.newcomer_role)}, W.general, CAROL, id="blocked-role"),
    pytest.param({"ALLOWED_ROLES": str(W.mod_role)}, W.general, ALICE, id="outside-allowed-role"),
    pytest.param({"BLOCKED_CHANNELS": str(W.general)}, W.general, ALICE, id="blocked-channel"),
    pytest.param({"BLOCKED_CHANNELS": str(W.general)}, W.thread, ALICE, id="blocked-parent"),
    pytest.param({"ALLOW_DMS": "false"}, W.dm_channel, ALICE, id="dms-off"),
]


@pytest.mark.parametrize("lists, channel, who", LATE_REFUSED)
async def test_a_late_answer_is_not_given_where_the_lists_refuse_it_now(
    lists: dict[str, str], channel: int, who: dict[str, str], tmp_path: Path,
    discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    key = DM if channel == W.dm_channel else channel_key(W.guild_id, channel)
    async with running(make_settings(tmp_path, discord_llm, **SWEEP_OFTEN, **lists)) as (
            rt, _, _):
        await _owe(rt, key, who)
        await _until_settled(tmp_path / "gistbot.db")
        assert discord_fake.sent_to(channel) == []
        assert _replies(discord_llm) == []


async def test_a_late_answer_asks_discord_for_the_roles_the_person_holds_now(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    # Bob is a moderator: admitted by the role allow list (Discord is asked: members are
    # not cached without the members intent); once he has left the server he holds no role
    settings = make_settings(tmp_path, discord_llm, ALLOWED_ROLES=str(W.mod_role), **SWEEP_OFTEN)
    async with running(settings) as (rt, _, _):
        mid = await _owe(rt, GENERAL, BOB)
        (sent,) = await posted(discord_fake, W.general)
        assert str(sent.json["message_reference"]["message_id"]) == mid
        assert discord_fake.calls("GET", f"/guilds/{W.guild_id}/members/{BOB['id']}")

        discord_fake.left_guild.add(BOB["id"])
        await _owe(rt, GENERAL, BOB)
        await _until_settled(tmp_path / "gistbot.db")
        assert len(discord_fake.sent_to(W.general)) == 1


async def _swept(h: Harness, key: ChannelKey, user: str, db: Path) -> None:
    """A mention by ``user`` in ``key`` is owed while the Slack adapter's own sweep runs,
    until the debt is settled (answered or dropped)."""
    ts = f"{int(time.time())}.000100"
    turn = NewTurn(key, ts, "user", user, "Alice", "<@UBOT> the vault code?", 8, time.time())
    await h.rt.store.record(replace(turn, extra=ReplyDue("", 30.0, route=ts)))
    stop = asyncio.Event()
    sweeping = start_answering_missed(h.adapter, stop)
    try:
        await _until_settled(db)
    finally:
        stop.set()
        await asyncio.wait_for(sweeping, scaled(10))


@pytest.mark.parametrize("env_extra, channel", [
    ({"BLOCKED_USERS": "U1"}, "C1"), ({"BLOCKED_CHANNELS": "C1"}, "C1"),
    ({"ALLOW_DMS": "false"}, "D1")], ids=["blocked-user", "blocked-channel", "dms-off"])
async def test_slack_gives_no_late_answer_where_the_lists_refuse_it_now(
    h: Harness, channel: str, tmp_path: Path
) -> None:
    await _swept(h, replace(KEY, channel=channel), "U1", tmp_path / "gistbot.db")
    assert posts(h.fake) == [] and h.llm.reply_calls == 0


@pytest.mark.parametrize("env_extra", [{"BLOCKED_USERS": "U2"}])
async def test_slack_still_answers_late_whom_the_lists_admit(h: Harness, tmp_path: Path
                                                             ) -> None:
    await _swept(h, KEY, "U1", tmp_path / "gistbot.db")
    assert len(posts(h.fake)) == 1 and h.llm.reply_calls == 1


# ---------------------------------------------------------------- scheduled digests


async def _digest_due(rt: Runtime, key: ChannelKey, by: str = "") -> float:
    """A daily digest of ``key`` (scheduled by ``by``) whose slot is two minutes from now;
    returns when to tick."""
    now = time.time()
    minute = int((now % 86400) // 60 + 2) % 1440
    await rt.storage.digests.set_digest_schedule(
        DigestSchedule(key, "daily", -1, minute, "UTC", now - 86400 * 2, by))
    return now + 181


@pytest.mark.parametrize("lists, posts_it", [
    ({}, True), ({"BLOCKED_USERS": ALICE["id"]}, False), ({"ALLOW_DMS": "false"}, False)],
    ids=["admitted", "blocked-user", "dms-off"])
async def test_a_digest_in_a_dm_is_not_posted_to_someone_blocked_since(
    lists: dict[str, str], posts_it: bool, tmp_path: Path, discord_fake: FakeDiscord,
    discord_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    # Alice scheduled a digest of her DM with the bot (anyone may, in their own DM)
    async with running(make_settings(tmp_path, discord_llm, **lists)) as (rt, _, _):
        await rt.store.record(NewTurn(DM, "1", "user", ALICE["id"], "Alice",
                                      "remind me: the vault code is VC-7731", 8, time.time()))
        digests = rt.features.catchup_commands.digests
        assert digests is not None
        at = await _digest_due(rt, DM, by=ALICE["id"])
        digests.clock = lambda: at
        assert await digests.tick() == int(posts_it)
        assert bool(discord_fake.sent_to(W.dm_channel)) is posts_it
        assert _failures(caplog) == []  # not posted because refused, not because it broke


@pytest.mark.parametrize("channel", [W.general, W.thread], ids=["channel", "thread"])
async def test_a_scheduled_digest_is_not_posted_in_a_channel_blocked_since(
    channel: int, tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI,
    caplog: pytest.LogCaptureFixture
) -> None:
    key = channel_key(W.guild_id, channel)
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(channel, ALICE, "the vault code is VC-7731")
        await watch.until(lambda: has_turns(rt, 1, key))
        at = await _digest_due(rt, key)
    # the operator blocks #general (and so its threads) and restarts
    settings = make_settings(tmp_path, discord_llm, BLOCKED_CHANNELS=str(W.general))
    async with running(settings) as (rt, _, _):
        digests = rt.features.catchup_commands.digests
        assert digests is not None
        digests.clock = lambda: at
        asked = len(discord_llm.chat_requests)
        assert await digests.tick() == 0
        assert discord_fake.sent_to(channel) == [] and discord_fake.sent_to(W.general) == []
        assert len(discord_llm.chat_requests) == asked
        assert await digests.tick() == 0  # the slot is done with, not tried again
        assert len(discord_llm.chat_requests) == asked
        assert _failures(caplog) == []


@pytest.mark.parametrize("env_extra", [{"BLOCKED_CHANNELS": "C1"}])
async def test_slack_posts_no_scheduled_digest_in_a_blocked_channel(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    turn = NewTurn(KEY, "1700000000.000100", "user", "U2", "Bob", "the vault code is VC-7731",
                   8, time.time())
    await h.rt.store.record(turn)
    at = await _digest_due(h.rt, KEY)
    digests = h.rt.features.catchup_commands.digests
    assert digests is not None and "slack" in digests.outlets
    digests.clock = lambda: at
    assert await digests.tick() == 0
    assert posts(h.fake) == [] and h.llm.purposes == []
    assert _failures(caplog) == []


@pytest.mark.parametrize("env_extra", [{"BLOCKED_USERS": "U1"}, {"ALLOW_DMS": "false"}],
                         ids=["blocked-user", "dms-off"])
async def test_slack_posts_no_scheduled_digest_in_the_dm_of_someone_blocked(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    dm = replace(KEY, channel="D1")
    await h.rt.store.record(NewTurn(dm, "1700000000.000100", "user", "U1", "Alice",
                                    "remind me: the vault code is VC-7731", 8, time.time()))
    at = await _digest_due(h.rt, dm, by="U1")
    digests = h.rt.features.catchup_commands.digests
    assert digests is not None
    digests.clock = lambda: at
    assert await digests.tick() == 0
    assert posts(h.fake) == [] and h.llm.purposes == []
    assert _failures(caplog) == []


# ---------------------------------------------------------------- backfill after downtime


@pytest.mark.parametrize("lists, kept", [
    ({"BLOCKED_ROLES": str(W.newcomer_role)}, ["before", "missed, by Alice", "missed, by Bob"]),
    ({"ALLOWED_ROLES": str(W.mod_role)}, ["before", "missed, by Bob"])],
    ids=["blocked-role", "allowed-role"])
async def test_backfill_asks_discord_for_the_roles_of_missed_messages_authors(
    lists: dict[str, str], kept: list[str], tmp_path: Path, discord_fake: FakeDiscord,
    discord_llm: FakeOpenAI
) -> None:
    # Messages read back over REST carry no member object (only gateway events do), so the
    # authors' roles are asked of Discord: a blocked role's messages are not kept when
    # RECORD_BLOCKED is false, and a role-admitted person's are
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, BOB, "before")
        await watch.handled(1)
    for who in (CAROL, ALICE, BOB):  # the bot is down: only the history has these
        await discord_fake.send_message(W.general, who, f"missed, by {who['global_name']}",
                                        deliver=False)
    settings = make_settings(tmp_path, discord_llm, RECORD_BLOCKED="false", **lists)
    async with running(settings, backfill=True) as (rt, client, _):
        assert client.backfill is not None
        async with asyncio.timeout(scaled(10)):
            await client.backfill.wait_runs(1)
        assert [t.text for t in await rt.store.turns(GENERAL)] == kept
