"""Mentions left unanswered are answered once after a restart (issue 14, item 3).

A mention is recorded with the reply it is owed (in the turn's transaction); the debt is
settled when the answer is delivered. Killed mid-reply (SIGKILL), the restarted process
answers it exactly once — also when Slack re-delivers the event meanwhile; two processes
sharing PostgreSQL at restart answer it once between them; a mention older than
``ANSWER_MISSED_SECONDS`` is left alone and logged; a Slack re-delivery of an unanswered
mention is answered, not dropped as a duplicate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from bot.conversation.sweep import MAX_ATTEMPTS, sweep_missed
from bot.stores.owed import ReplyDue
from memory.models import ChannelKey, NewTurn
from memory.store import Store
from tests.fakes.openai_server import is_summary_request
from tests.fakes.slack_api import FakeSlack
from tests.harness.postgres import PG, fresh_schema, reachable
from tests.harness.process import (
    SIGKILL,
    SIGTERM,
    bot_process,
    reply_requests,
    slack_env,
    slow_replies,
)
from tests.harness.slack import (
    KEY,
    SECRET,
    Harness,
    directory,
    event_body,
    mention,
    posts,
    sign,
)


def answers(slack: FakeSlack, needle: str = "You said: ") -> list[str]:
    """Every answer text the bot posted or put into a placeholder."""
    texts = [c.params.get("text", "") for c in slack.calls_to("chat.postMessage")]
    texts += [c.params.get("text", "") for c in slack.calls_to("chat.update")]
    return [t for t in texts if needle in t]


async def post_event(url: str, event: dict[str, object], event_id: str,
                     retry: int | None = None) -> int:
    body = json.dumps(event_body(event, event_id=event_id))
    headers = {"Content-Type": "application/json"} | sign(body)
    if retry is not None:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as r:
        return r.status


def mention_folded(db: Path, message_id: str) -> bool:
    """Whether compaction has folded the stored message into the channel's summary."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT c.folded_through >= t.seq FROM channels c JOIN turns t "
            "ON t.channel_id = c.id WHERE t.message_id = ?", (message_id,)).fetchone()
    return bool(row and row[0])


def open_debts(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT message_id FROM owed_replies")]


@pytest.mark.slow
async def test_sigkill_mid_reply_then_restart_answers_exactly_once(tmp_path: Path) -> None:
    db = tmp_path / "bot.db"
    ts = f"{int(time.time())}.000200"
    asked = mention("<@UBOT> what about order 1234?", ts=ts)
    async with FakeSlack() as slack, slow_replies(4.0) as llm:
        directory(slack)
        # A short claim, so the restart need not wait 30 s for the dead process's to run out.
        env = slack_env(f"sqlite:///{db}", slack, llm, SECRET, REPLY_CLAIM_SECONDS="2")
        async with bot_process(env) as bot:
            url = (await bot.wait_log(r"listening on (\S+)")).group(1)
            assert await post_event(url, asked, "EvK") == 200
            await llm.wait_for(lambda m: reply_requests(m) >= 1, within=20)
            bot.send(SIGKILL)
            assert await bot.wait(within=10) == -SIGKILL
        assert answers(slack) == [] and open_debts(db) == [ts]
        llm.latency = None
        async with bot_process(env) as again:
            url = (await again.wait_log(r"listening on (\S+)")).group(1)
            # Slack re-delivers the event meanwhile: the same mention, answered once anyway.
            assert await post_event(url, asked, "EvK", retry=1) == 200
            await slack.wait_until(lambda: bool(answers(slack)), within=20, what="the answer")
            assert await post_event(url, asked, "EvK", retry=2) == 200
            await again.wait_log(r"slack: \d+ mentions left unanswered before the start")
            again.send(SIGTERM)
            assert await again.wait(within=20) == 0, again.log
    assert len(answers(slack)) == 1
    assert open_debts(db) == []
    with sqlite3.connect(db) as conn:
        ids = [r[0] for r in conn.execute("SELECT message_id FROM turns")]
    assert sorted(ids) == sorted([ts, f"reply:{ts}"])



@pytest.mark.slow
async def test_a_late_answer_after_sigkill_is_for_its_mention_though_compaction_folded_it(
    tmp_path: Path,
) -> None:
    """Killed mid-reply while 30 more messages arrive and compaction folds the mention
    (``MAX_HISTORY_MESSAGES=10``): after the restart the model still gets the mention as the
    last user message, not a prompt with only the system message."""
    db = tmp_path / "bot.db"
    now = int(time.time())
    ts = f"{now}.000300"
    asked = mention("<@UBOT> which port does the staging proxy listen on?", ts=ts)
    async with FakeSlack() as slack, slow_replies(30.0) as llm:
        directory(slack)
        env = slack_env(f"sqlite:///{db}", slack, llm, SECRET, REPLY_CLAIM_SECONDS="2",
                        MAX_HISTORY_MESSAGES="10", KEEP_RECENT_MESSAGES="4")
        async with bot_process(env) as bot:
            url = (await bot.wait_log(r"listening on (\S+)")).group(1)
            assert await post_event(url, asked, "EvQ") == 200
            await llm.wait_for(lambda m: reply_requests(m) >= 1, within=20)
            for i in range(30):
                chatter = mention(f"chatter line {i}", ts=f"{now}.{400 + i:06d}",
                                  kind="message", user=("U1", "U2")[i % 2])
                assert await post_event(url, chatter, f"EvC{i}") == 200
            for _ in range(400):  # compaction folds the mention meanwhile (20 s at most)
                if mention_folded(db, ts):
                    break
                await asyncio.sleep(0.05)  # another process writes the file: poll it
            else:
                raise AssertionError("compaction did not fold the mention")
            bot.send(SIGKILL)
            assert await bot.wait(within=10) == -SIGKILL
        llm.latency = None
        asked_before = len(llm.chat_requests)
        async with bot_process(env) as again:
            await again.wait_log(r"listening on (\S+)")
            await slack.wait_until(lambda: bool(answers(slack)), within=30, what="the answer")
            again.send(SIGTERM)
            assert await again.wait(within=20) == 0, again.log
    [request] = [r for r in llm.chat_requests[asked_before:]
                 if not is_summary_request(r.json or {})]
    messages = (request.json or {})["messages"]
    assert len(messages) > 1, "the model got only the system message"
    assert messages[-1]["role"] == "user"
    assert "which port does the staging proxy listen on?" in messages[-1]["content"]
    assert len(answers(slack)) == 1
    assert "which port does the staging proxy" in answers(slack)[0]


# ---------------------------------------------------------------- PostgreSQL, two replicas


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    """A fresh PostgreSQL schema (``#schema`` URL), dropped afterwards."""
    if not reachable():
        pytest.skip(f"no PostgreSQL listening for {urlsplit(PG).netloc}")
    async with fresh_schema() as url:
        yield url


async def owe_as_a_dead_process(store: Store, key: ChannelKey, ts: str, *,
                                age: float = 0.0, claim: float = 0.2) -> None:
    """The state a process killed mid-reply leaves: the mention stored, its debt claimed by
    the dead process until ``claim`` seconds from now."""
    turn = NewTurn(key, ts, "user", "U1", "Alice", "@gistbot what about order 1234?", 8,
                   float(ts.split(".")[0]) - age)
    await store.record(replace(turn, extra=ReplyDue("dead-process", claim, route=ts)))


@pytest.mark.slow
async def test_two_processes_sharing_postgresql_answer_a_missed_mention_once(
    tmp_path: Path, pg_url: str
) -> None:
    from bot.app import storage_for_url

    ts = f"{int(time.time())}.000300"
    storage = storage_for_url(pg_url)
    await storage.open()
    try:
        await owe_as_a_dead_process(storage.memory, KEY, ts)
        await asyncio.sleep(0.3)  # the dead process's claim runs out
    finally:
        await storage.close()
    async with FakeSlack() as slack, slow_replies(0.0) as llm:
        directory(slack)
        env = slack_env(pg_url, slack, llm, SECRET)
        async with bot_process(env) as one, bot_process(env) as two:
            for bot in (one, two):
                await bot.wait_log(r"slack: \d+ mentions left unanswered before the start")
            for bot in (one, two):
                bot.send(SIGTERM)
            assert [await one.wait(within=20), await two.wait(within=20)] == [0, 0]
    assert len(answers(slack)) == 1, one.log + two.log
    assert sum("answering" in b.log and ts in b.log for b in (one, two)) == 1
    storage = storage_for_url(pg_url)
    await storage.open()
    try:
        assert await storage.owed.claim_owed(KEY, ts, "anyone", 30) is None  # settled
        ids = [t.message_id for t in await storage.memory.turns(KEY)]
    finally:
        await storage.close()
    assert ids == [ts, f"reply:{ts}"]


# ---------------------------------------------------------------- in-process, Slack harness


async def test_a_mention_older_than_the_limit_is_logged_not_answered(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.conversation.sweep")
    now = int(time.time())
    old, young = f"{now}.000401", f"{now}.000402"
    await owe_as_a_dead_process(h.rt.store, KEY, old, age=400)  # ANSWER_MISSED_SECONDS=300
    await owe_as_a_dead_process(h.rt.store, KEY, young, age=200)
    await asyncio.sleep(0.3)
    assert await sweep_missed(h.rt.features, "slack", h.adapter.events.flow) == 1
    assert [p["thread_ts"] for p in posts(h.fake)] == [young]
    assert h.llm.reply_calls == 1
    [warning] = [r.getMessage() for r in caplog.records if "not answering" in r.getMessage()]
    assert old in warning and "ANSWER_MISSED_SECONDS" in warning
    assert await h.rt.storage.owed.claim_owed(KEY, old, "x", 30) is None  # dropped, not retried
    assert await sweep_missed(h.rt.features, "slack", h.adapter.events.flow) == 0


async def test_a_sweep_cut_short_charges_only_the_mention_it_was_answering(h: Harness) -> None:
    # A restart finds three owed mentions; each time, the process dies while posting the
    # first answer. Only that mention is charged an attempt: the other two were never tried
    # and are answered once the process lives (a batch claim used to charge all three, so
    # MAX_ATTEMPTS kills gave up mentions nobody had tried to answer).
    now = int(time.time())
    tss = [f"{now}.00070{i}" for i in range(3)]
    for ts in tss:
        await owe_as_a_dead_process(h.rt.store, KEY, ts)
    await asyncio.sleep(0.3)

    class Killed:
        async def deliver(self, pending: object) -> bool:
            raise asyncio.CancelledError  # SIGKILL while posting

    for _ in range(MAX_ATTEMPTS):
        with pytest.raises(asyncio.CancelledError):
            await sweep_missed(h.rt.features, "slack", Killed())  # type: ignore[arg-type]
    assert await sweep_missed(h.rt.features, "slack", h.adapter.events.flow) == 2
    assert sorted(p["thread_ts"] for p in posts(h.fake)) == tss[1:]


async def test_a_slack_redelivery_of_an_unanswered_mention_is_answered_once(h: Harness) -> None:
    ts = f"{int(time.time())}.000500"
    await owe_as_a_dead_process(h.rt.store, KEY, ts)
    await asyncio.sleep(0.3)
    assert await h.event(mention(ts=ts), event_id="EvR", retry=1) == 200
    await h.settle()
    assert answers(h.fake, "Hello from the model.") == ["Hello from the model."]
    assert [p["thread_ts"] for p in posts(h.fake, besides_placeholder=False)] == [ts]
    assert await h.event(mention(ts=ts), event_id="EvR", retry=2) == 200
    await h.settle()
    assert len(posts(h.fake, besides_placeholder=False)) == 1 and h.llm.reply_calls == 1
    assert [t.message_id for t in await h.turns()] == [ts, f"reply:{ts}"]


async def test_a_redelivery_while_the_dead_process_still_holds_the_claim_waits(
    h: Harness,
) -> None:
    ts = f"{int(time.time())}.000600"
    await owe_as_a_dead_process(h.rt.store, KEY, ts, claim=30)
    assert await h.event(mention(ts=ts), event_id="EvW", retry=1) == 200
    await h.settle()
    assert posts(h.fake) == [] and h.llm.reply_calls == 0  # owed still, answered later
    assert await h.rt.storage.owed.claim_owed(KEY, ts, "dead-process", 30) is not None


async def test_discord_answers_a_missed_mention_as_a_reply_to_it(
    tmp_path: Path, discord_fake: object, discord_llm: object
) -> None:
    import discord

    from tests.harness.discord import GENERAL, W, make_settings, running

    fake, llm = discord_fake, discord_llm
    settings = make_settings(tmp_path, llm)  # type: ignore[arg-type]
    async with running(settings) as (rt, client, _):
        mid = str(discord.utils.time_snowflake(discord.utils.utcnow()))
        turn = NewTurn(GENERAL, mid, "user", str(W.alice["id"]), "Alice",
                       "@gistbot what about order 1234?", 8, time.time())
        await rt.store.record(replace(turn, extra=ReplyDue("dead-process", 0.2)))
        await asyncio.sleep(0.3)
        assert await sweep_missed(rt.features, "discord", client.flow) == 1
        [sent] = fake.sent_to(W.general)  # type: ignore[attr-defined]
        assert str(sent.json["message_reference"]["message_id"]) == mid
        assert "You said" in sent.json["content"]
        assert sent.json["allowed_mentions"]["parse"] == []
        assert await sweep_missed(rt.features, "discord", client.flow) == 0
        assert await rt.storage.owed.claim_owed(GENERAL, mid, "x", 30) is None  # settled
