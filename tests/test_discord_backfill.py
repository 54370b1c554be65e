"""Backfill after downtime on Discord: a real discord.py client against the loopback
Discord, which serves channel history (``GET /channels/{id}/messages``) and can answer 429.

Messages posted while the bot was stopped, or while its gateway connection was down, are
read back on the next READY/RESUMED and remembered exactly once, never answered; over
``BACKFILL_MAX_MESSAGES`` the newest are kept and the rest logged as skipped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.discord.client import GistbotClient
from adapters.discord.text import channel_key
from bot.app import Runtime
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, is_summary_request
from tests.harness.discord import GENERAL, W, has_turns, make_settings, mention, running

ROOT = Path(__file__).resolve().parent.parent
THREAD = channel_key(W.guild_id, W.thread)
DM = channel_key(None, W.dm_channel)


async def backfilled(client: GistbotClient, runs: int = 1, within: float = 10.0) -> None:
    """Wait until ``runs`` backfill runs have finished and none is pending."""
    bf = client.backfill
    assert bf is not None, "backfill is off"
    async with asyncio.timeout(within):
        await bf.wait_runs(runs)


async def user_ids(rt: Runtime, key: Any = GENERAL) -> list[str]:
    return [t.message_id for t in await rt.store.turns(key) if t.role == "user"]


def history_reads(fake: FakeDiscord, channel_id: int) -> list[Any]:
    return fake.calls("GET", f"/channels/{channel_id}/messages")


async def test_messages_posted_while_down_are_remembered_once_and_not_answered(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    # ANSWER_MISSED_SECONDS=0: a missed mention is too old to answer, so none is (the young
    # ones are answered once: the SIGKILL test below).
    settings = make_settings(tmp_path, discord_llm, ANSWER_MISSED_SECONDS="0")
    fake = discord_fake
    async with running(settings, backfill=True) as (rt, client, watch):
        await backfilled(client)  # nothing remembered yet: no channel is read
        assert not history_reads(fake, W.general)
        seen = [await fake.send_message(W.general, W.alice, "before: order 1"),
                await fake.send_message(W.thread, W.bob, "thread before"),
                await fake.send_message(W.dm_channel, W.alice, "dm before")]
        await watch.until(lambda: has_turns(rt, 1, THREAD))
        await watch.until(lambda: has_turns(rt, 2, DM))  # the DM is answered (live)
        await watch.until(lambda: has_turns(rt, 1))
    answered_live = len(fake.calls("POST", "/channels/"))
    requests_live = len(discord_llm.chat_requests)

    # The bot is down: nothing is delivered, only the history has these.
    missed = {W.general: [], W.thread: [], W.dm_channel: []}
    for i in range(12):
        author = (W.alice, W.bob)[i % 2]
        missed[W.general].append(await fake.send_message(W.general, author, f"missed {i}"))
    missed[W.general].append(await fake.send_message(
        W.general, W.bob, mention("are you there?"), mentions=[W.bot_user]))
    await fake.send_message(W.general, W.other_bot, "a bot's message is not conversation")
    missed[W.thread].append(await fake.send_message(W.thread, W.alice, "thread missed"))
    missed[W.dm_channel].append(await fake.send_message(W.dm_channel, W.alice, "dm missed"))

    async with running(settings, backfill=True) as (rt, client, _):
        await backfilled(client)
        general = await user_ids(rt)
        assert general == [seen[0]["id"]] + [m["id"] for m in missed[W.general]]
        assert len(set(general)) == len(general)
        assert await user_ids(rt, THREAD) == [seen[1]["id"], missed[W.thread][0]["id"]]
        assert await user_ids(rt, DM) == [seen[2]["id"], missed[W.dm_channel][0]["id"]]
        texts = [t.text for t in await rt.store.turns(GENERAL)]
        assert "@gistbot are you there?" in texts
        assert not any("bot's message" in t for t in texts)
        # Remembered, not answered: no message sent, no model call, no assistant turn.
        assert len(fake.calls("POST", "/channels/")) == answered_live
        assert len(discord_llm.chat_requests) == requests_live
        assert [t.role for t in await rt.store.turns(GENERAL)].count("assistant") == 0
        # One read per channel, newest first: the gap is shorter than a page.
        [read] = history_reads(fake, W.general)
        assert read.query == {"limit": "100"}
        report = client.backfill.last[GENERAL]  # type: ignore[union-attr]
        assert (report.new, report.skipped) == (13, 0)

        # Idempotent: a second backfill (another reconnect) finds and adds nothing.
        client.start_backfill("test", 0)
        await backfilled(client, runs=2)
        assert await user_ids(rt) == general
        assert client.backfill.last[GENERAL].new == 0  # type: ignore[union-attr]


async def test_over_the_bound_the_newest_are_kept_and_the_rest_logged_as_skipped(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.backfill")
    settings = make_settings(tmp_path, discord_llm, BACKFILL_MAX_MESSAGES="50")
    async with running(settings, backfill=True) as (rt, _, watch):
        first = await discord_fake.send_message(W.general, W.alice, "last seen")
        await watch.until(lambda: has_turns(rt, 1))
    missed = [await discord_fake.send_message(W.general, W.bob, f"missed {i}")
              for i in range(80)]
    async with running(settings, backfill=True) as (rt, client, _):
        await backfilled(client)
        assert await user_ids(rt) == [first["id"]] + [m["id"] for m in missed[30:]]
        report = client.backfill.last[GENERAL]  # type: ignore[union-attr]
        assert (report.fetched, report.new, report.skipped) == (50, 50, 30)
    assert any("50 missed messages remembered (the newest 50); 30 older ones skipped "
               "(BACKFILL_MAX_MESSAGES=50)" in r.getMessage() for r in caplog.records)
    # Newest first (one page of 50), then one counting page forward from the stored one.
    reads = history_reads(discord_fake, W.general)
    assert [r.query for r in reads] == [{"limit": "50"}, {"limit": "100", "after": first["id"]}]


async def test_a_rate_limited_history_read_is_retried(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm)
    async with running(settings, backfill=True) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "last seen")
        await watch.until(lambda: has_turns(rt, 1))
    missed = [await discord_fake.send_message(W.general, W.bob, f"missed {i}") for i in range(3)]
    discord_fake.rate_limits = 2
    async with running(settings, backfill=True) as (rt, client, _):
        await backfilled(client)
        assert (await user_ids(rt))[1:] == [m["id"] for m in missed]
    assert discord_fake.rate_limits == 0
    assert len(history_reads(discord_fake, W.general)) == 3  # two 429s, then the page


async def test_backfill_off_reads_no_history(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, BACKFILL_MAX_MESSAGES="0")
    async with running(settings, backfill=True) as (rt, client, watch):
        await discord_fake.send_message(W.general, W.alice, "last seen")
        await watch.until(lambda: has_turns(rt, 1))
    await discord_fake.send_message(W.general, W.bob, "missed")
    async with running(settings, backfill=True) as (rt, client, _):
        assert client.backfill is None
        assert len(await user_ids(rt)) == 1
    assert not history_reads(discord_fake, W.general)


@pytest.mark.parametrize("resume", [True, False], ids=["resumed", "new-session"])
async def test_a_gateway_reconnect_backfills_what_the_connection_missed(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI, resume: bool
) -> None:
    discord_fake.accept_resume = resume
    settings = make_settings(tmp_path, discord_llm)
    async with running(settings, backfill=True) as (rt, client, watch):
        await backfilled(client)
        first = await discord_fake.send_message(W.general, W.alice, "live")
        await watch.until(lambda: has_turns(rt, 1))
        # Posted while the connection is down: the client never gets these events.
        lost = [await discord_fake.send_message(W.general, W.bob, f"lost {i}", deliver=False)
                for i in range(3)]
        identifies = len(discord_fake.identifies)
        await discord_fake.request_reconnect()
        await backfilled(client, runs=2)
        assert await user_ids(rt) == [first["id"]] + [m["id"] for m in lost]
        assert (len(discord_fake.identifies) > identifies) is not resume
        # And live events still arrive after it.
        after = await discord_fake.send_message(W.general, W.alice, "after")
        await watch.until(lambda: has_turns(rt, 5))
        assert (await user_ids(rt))[-1] == after["id"]


@pytest.mark.slow
async def test_sigkill_during_a_burst_then_restart_backfills_every_missed_message(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    fake = discord_fake
    db = tmp_path / "gistbot.db"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.discord_child", str(db), fake.api_base,
        str(fake.gateway_url), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    acked: list[bytes] = []

    async def read_acks() -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            acked.append(line)

    reader = asyncio.create_task(read_acks())
    try:
        await fake.wait_for(lambda f: f.connected, within=30)
        sent = [await fake.send_message(W.general, W.alice, "first")]
        killed = False
        for i in range(300):  # a burst; the process dies in the middle of it
            sent.append(await fake.send_message(W.general, (W.alice, W.bob)[i % 2], f"burst {i}"))
            await asyncio.sleep(0.002)  # paced, so the kill lands while the child records
            if not killed and len(acked) >= 50:  # some stored, more in flight
                proc.send_signal(signal.SIGKILL)
                killed = True
        assert killed, f"the child acknowledged only {len(acked)} messages"
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        await reader
        errors = await proc.stderr.read()
    assert b"Traceback" not in errors, errors.decode()
    assert proc.returncode == -signal.SIGKILL
    for i in range(40):  # while it is down, mentions included
        text = mention(f"down {i}") if i % 10 == 0 else f"down {i}"
        sent.append(await fake.send_message(W.general, W.bob, text,
                                            mentions=[W.bot_user] if i % 10 == 0 else []))
    posts_before = len(fake.calls("POST", "/channels/"))

    mentions = {m["id"] for i, m in enumerate(sent[-40:]) if i % 10 == 0}
    async with running(make_settings(tmp_path, discord_llm), backfill=True) as (rt, client, _):
        await backfilled(client)
        stored = await user_ids(rt)
        report = client.backfill.last[GENERAL]  # type: ignore[union-attr]
        # The 4 mentions posted while down are young (ANSWER_MISSED_SECONDS=300): each is
        # answered once by the missed-mention sweep, as a reply to it.
        await fake.wait_for(
            lambda f: len(f.calls("POST", "/channels/")) >= posts_before + len(mentions),
            within=30)
        await asyncio.sleep(1.0)  # a second answer to any of them would show by now
        answers = fake.calls("POST", "/channels/")[posts_before:]
    print(f"acknowledged {len(acked)}, stored live before the kill: {341 - report.new}, "
          f"backfilled: {report.new}")
    assert report.new >= 40 and report.skipped == 0
    # Newest first, pages of 100, stopping at the first page that reaches the stored one.
    assert len(history_reads(fake, W.general)) == report.new // 100 + 1
    assert sorted(stored, key=int) == [m["id"] for m in sent]  # every one, once
    assert len(set(stored)) == len(stored) == 341
    assert len(answers) == len(mentions) == 4  # only the mentions, each once
    replied_to = {str((a.json or {}).get("message_reference", {}).get("message_id"))
                  for a in answers}
    assert replied_to == mentions
    assert len(discord_llm.chat_requests) == 4


async def test_a_late_answer_is_built_for_its_mention_after_compaction_folded_it(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    """A mention posted while the bot was down, then 30 more messages: the backfill folds
    the mention into the summary before the sweep answers it. The model still gets the
    mention as the last user message, and the answer is a reply to it."""
    fake = discord_fake
    # The sweep that answers it runs every third of the claim: 1 s, not the default 5 s.
    settings = make_settings(tmp_path, discord_llm, MAX_HISTORY_MESSAGES="10",
                             KEEP_RECENT_MESSAGES="4", REPLY_CLAIM_SECONDS="3")
    async with running(settings, backfill=True) as (rt, client, watch):
        await fake.send_message(W.general, W.alice, "hello before the downtime")
        await watch.until(lambda: has_turns(rt, 1))
    question = await fake.send_message(
        W.general, W.bob, mention("which port does the staging proxy listen on?"),
        mentions=[W.bot_user])
    for i in range(30):
        await fake.send_message(W.general, (W.alice, W.bob)[i % 2], f"chatter line {i}")
    posts_before = len(fake.calls("POST", "/channels/"))

    async with running(settings, backfill=True) as (rt, client, _):
        await backfilled(client)
        await fake.wait_for(lambda f: len(f.calls("POST", "/channels/")) > posts_before,
                            within=30)
        state = await rt.store.state(GENERAL)
    [answer] = fake.calls("POST", "/channels/")[posts_before:]
    assert str((answer.json or {}).get("message_reference", {}).get("message_id")) == question["id"]
    [request] = [r for r in discord_llm.chat_requests
                 if not is_summary_request(r.json or {})]
    messages = (request.json or {})["messages"]
    assert len(messages) > 1, "the model got only the system message"
    assert messages[-1]["role"] == "user"
    assert "which port does the staging proxy listen on?" in messages[-1]["content"]
    assert state.folded_through > 0  # compaction did fold meanwhile
