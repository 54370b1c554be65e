"""Every model call is metered against the daily token quotas at the LLM gateway
(``bot.channels.usage_tab``, ``bot.channels.quota``): ``/summary``, ``/catchup``, ``/digest now``,
digests and background summaries as well as replies — refused before any request reaches the
model endpoint when the person or the server is over its limit, and otherwise charged
what the provider reported, per kind, to the person and the server. Through the real
``openai`` SDK against the loopback OpenAI fake (requests counted there), on SQLite."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.app import Runtime
from bot.catchup.command import Where
from bot.catchup.digests import latest_slot
from bot.channels.config_command import Caller, ConfigRequest, parse_config
from bot.channels.quota import KINDS
from bot.stores.digests import DigestSchedule
from bot.stores.usage import UsageKey
from memory.errors import CallRefused
from memory.models import ChannelKey
from tests.fakes.openai_server import FakeOpenAI, default_responder, is_summary_request
from tests.harness.chat import ask
from tests.harness.service import KEY, bodies, msg, runtime

ALICE, SERVER = UsageKey("test", "w1", "alice"), UsageKey("test", "w1")
HERE = Where(KEY)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(responder=default_responder) as server:
        yield server


async def chat(rt: Runtime, n: int) -> None:
    """``n`` messages nobody addresses to the bot (recorded, not answered)."""
    for i in range(n):
        await ask(rt, msg(i, f"release v2.{i} is tagged, ticket OPS-{i}"))


def usage_request() -> ConfigRequest:
    parsed = parse_config("usage")
    assert isinstance(parsed, ConfigRequest)
    return parsed


async def test_a_server_over_its_limit_gets_no_model_call_for_summary_catchup_or_digest_now(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, DAILY_TOKENS_PER_SERVER="3000") as rt:
        await chat(rt, 3)
        await rt.storage.usage.add_tokens(rt.features.quota.day(), [SERVER], 3000)
        answers = [
            await rt.features.memory_commands.summary(KEY, "alice"),
            await rt.features.catchup_commands.catchup(HERE, "alice", "1d"),
            await rt.features.catchup_commands.digest(HERE, "now", allowed=True, by="alice"),
        ]
        for answer in answers:
            assert not answer.ok  # private wherever it was asked
            assert "this server's daily allowance of tokens (3,000)" in answer.text
            assert "00:00 UTC" in answer.text
        assert fake.chat_requests == []  # nothing reached the model
        used = await rt.storage.usage.tokens_used(rt.features.quota.day(), [SERVER, ALICE])
        assert used == {SERVER: 3000, ALICE: 0}


async def test_a_person_over_their_limit_gets_no_model_call_and_others_still_do(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, DAILY_TOKENS_PER_USER="50000") as rt:
        await chat(rt, 3)
        await rt.storage.usage.add_tokens(rt.features.quota.day(), [ALICE], 50000)
        for answer in (await rt.features.memory_commands.summary(KEY, "alice"),
                       await rt.features.catchup_commands.catchup(HERE, "alice", "1d"),
                       await rt.features.catchup_commands.catchup(HERE, "alice", "1d")):
            assert not answer.ok and "your daily allowance of tokens (50,000)" in answer.text
        assert fake.chat_requests == []
        bob = await rt.features.memory_commands.summary(KEY, "bob")
        assert bob.ok and "OPS-" in bob.text
        assert len(fake.chat_requests) == 1  # bob has his own allowance


@pytest.mark.parametrize("limit", ["0", "1000000"])  # the cheap path, and the locked one
async def test_each_call_is_charged_to_the_person_and_the_server_by_kind(
    tmp_path: Path, fake: FakeOpenAI, limit: str
) -> None:
    env = {"DAILY_TOKENS_PER_SERVER": limit, "DAILY_TOKENS_PER_USER": limit}
    async with runtime(tmp_path, fake, **env) as rt:
        await chat(rt, 3)
        assert (await rt.features.memory_commands.summary(KEY, "alice")).ok
        assert (await rt.features.catchup_commands.catchup(HERE, "alice", "1d")).ok
        assert (await rt.features.catchup_commands.digest(HERE, "now", allowed=True, by="alice")).ok
        reply = await ask(rt, msg(9, "what was tagged?", mention=True))
        assert reply is not None and not reply.failed
        await rt.features.quota.flush()
        day = rt.features.quota.day()
        kinds = await rt.storage.usage.tokens_by_kind(day, [ALICE, SERVER])
        assert set(kinds[ALICE]) == {"reply", "summary", "catchup"}  # a digest is the server's
        assert set(kinds[SERVER]) == {"reply", "summary", "catchup", "digest"}
        assert all(n > 0 for n in kinds[SERVER].values())
        reported = sum(t.prompt_tokens + t.completion_tokens for t in rt.meter.totals().values())
        totals = await rt.storage.usage.tokens_used(day, [ALICE, SERVER])
        assert totals[SERVER] == sum(kinds[SERVER].values()) == reported
        assert totals[ALICE] == reported - kinds[SERVER]["digest"]


async def test_a_direct_message_counts_against_the_person_only(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, DAILY_TOKENS_PER_SERVER="10") as rt:
        await rt.storage.usage.add_tokens(rt.features.quota.day(), [SERVER], 10)  # server: over
        reply = await ask(rt, replace(msg(1, "hello there"), is_direct=True))
        assert reply is not None and not reply.failed
        await rt.features.quota.flush()
        used = await rt.storage.usage.tokens_used(rt.features.quota.day(), [ALICE, SERVER])
        assert used[ALICE] > 0 and used[SERVER] == 10


async def test_background_summaries_are_the_servers_and_wait_while_it_is_over(
    tmp_path: Path, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"DAILY_TOKENS_PER_SERVER": "1000000", "MAX_HISTORY_MESSAGES": "4",
           "KEEP_RECENT_MESSAGES": "2"}
    async with runtime(tmp_path, fake, **env) as rt:
        await chat(rt, 3)
        await rt.memory.compact_now(KEY, force=True)
        assert len(bodies(fake, summary=True)) == 1
        day = rt.features.quota.day()
        kinds = await rt.storage.usage.tokens_by_kind(day, [ALICE, SERVER])
        assert kinds[ALICE] == {} and set(kinds[SERVER]) == {"compaction"}

        await rt.storage.usage.add_tokens(day, [SERVER], 1_000_000)  # now over
        with pytest.raises(CallRefused):
            await rt.memory.compact_now(KEY, force=True)
        caplog.set_level(logging.INFO, logger="memory.compaction")
        for i in range(10, 20):  # overflow the window: background compaction is due
            await ask(rt, msg(i, f"more news number {i}"))
        deadline = time.monotonic() + 5
        while "waits: over this server's daily token limit" not in caplog.text:
            assert time.monotonic() < deadline, "the refused compaction was never reported"
            await asyncio.sleep(0.02)
        assert len(bodies(fake, summary=True)) == 1  # never sent
        assert caplog.text.count("waits: over") == 1  # one line, no storm
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_config_usage_lists_every_kind_for_the_person_and_the_server(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    async with runtime(tmp_path, fake, DAILY_TOKENS_PER_SERVER="1000000") as rt:
        await chat(rt, 3)
        await rt.features.memory_commands.summary(KEY, "alice")
        await rt.features.catchup_commands.catchup(HERE, "alice", "1d")
        await rt.memory.compact_now(KEY, force=True)
        day = rt.features.quota.day()
        kinds = await rt.storage.usage.tokens_by_kind(day, [ALICE, SERVER])
        await rt.storage.usage.add_tokens(day, [SERVER], 7)  # counted before kinds were kept
        answer = await rt.features.config_command.configure(KEY, usage_request(), Caller("alice",
                                                                                         "Alice"))
        server_line, you_line = answer.text.splitlines()[1:]
        assert server_line.startswith(f"- this server: {sum(kinds[SERVER].values()) + 7:,} "
                                      "of 1,000,000")
        for kind, name in KINDS.items():
            assert f"{name} {kinds[SERVER].get(kind, 0):,}" in server_line
        assert "not broken down 7" in server_line
        assert you_line.startswith(f"- you: {sum(kinds[ALICE].values()):,} (no limit)")
        for kind in ("reply", "summary", "catchup"):
            assert f"{KINDS[kind]} {kinds[ALICE].get(kind, 0):,}" in you_line
        assert kinds[ALICE]["summary"] > 0 and kinds[ALICE]["catchup"] > 0


class Posts:
    """The digest scheduler's outlet: what it would post in the channel."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def where(self, key: ChannelKey) -> Where:
        return Where(key)

    async def post(self, key: ChannelKey, text: str, *, slot_at: float = 0.0,
                   in_thread: bool = False) -> None:
        self.texts.append(text)


async def test_a_scheduled_digest_over_the_servers_limit_waits_unposted_then_is_posted_once(
    tmp_path: Path, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.catchup.digests")
    async with runtime(tmp_path, fake, DAILY_TOKENS_PER_SERVER="3000") as rt:
        digests = rt.features.catchup_commands.digests
        assert digests is not None
        now = time.time()
        minute = (int(now % 86400) // 60 - 30) % 1440  # the slot was half an hour ago
        schedule = DigestSchedule(KEY, "daily", -1, minute, "UTC", now - 3 * 86400, "admin")
        await rt.storage.digests.set_digest_schedule(schedule)
        slot = latest_slot(schedule, now)
        for i in range(3):
            await ask(rt, replace(msg(i, f"ticket OPS-{i} is done"),
                                  sent_at=slot - 600 + i))
        posts, digests.claim_ttl = Posts(), 0.2
        digests.add_outlet("test", posts)
        await rt.storage.usage.add_tokens(rt.features.quota.day(), [SERVER], 3000)

        assert await digests.tick() == 0
        assert posts.texts == [] and fake.chat_requests == []
        [claim] = await rt.storage.digests.digest_slots(KEY)
        assert claim.state == "claimed"  # neither posted nor skipped: tried again later
        assert "not posted: over this server's daily token limit" in caplog.text
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

        rt.features.quota.clock = lambda: time.time() + 86_400  # a new UTC day
        deadline = time.monotonic() + 5
        while not await digests.tick():  # once the claim has expired
            assert time.monotonic() < deadline, "the digest was never posted"
            await asyncio.sleep(0.05)
        assert len(posts.texts) == 1 and "OPS-" in posts.texts[0]
        assert await digests.tick() == 0  # once
        await rt.features.quota.flush()
        kinds = await rt.storage.usage.tokens_by_kind(rt.features.quota.day(), [SERVER])
        assert set(kinds[SERVER]) == {"digest"}


async def poll(check: Any, what: str, within: float = 10.0) -> None:
    """Wait until ``await check()`` is true (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_a_compaction_started_by_someones_reply_is_charged_to_the_server_only(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    env = {"DAILY_TOKENS_PER_USER": "1000000", "MAX_HISTORY_MESSAGES": "4",
           "KEEP_RECENT_MESSAGES": "2"}
    async with runtime(tmp_path, fake, **env) as rt:
        for i in range(3):  # each reply's record overflows the window: compaction starts
            reply = await ask(rt, msg(i, f"note OPS-{i}, please", mention=True))
            assert reply is not None and not reply.failed

        async def compacted() -> bool:
            await rt.features.quota.flush()
            kinds = await rt.storage.usage.tokens_by_kind(rt.features.quota.day(), [SERVER])
            return "compaction" in kinds[SERVER]

        await poll(compacted, "no background summary was charged")
        kinds = await rt.storage.usage.tokens_by_kind(rt.features.quota.day(), [ALICE])
        assert set(kinds[ALICE]) == {"reply"}  # the task inherited alice's bill, not her tab


async def test_a_reply_on_a_limited_server_does_not_wait_for_its_background_summary(
    tmp_path: Path,
) -> None:
    def slow_summaries(body: dict[str, Any]) -> float:
        return 30.0 if is_summary_request(body) else 0.0

    async with FakeOpenAI(responder=default_responder, latency=slow_summaries) as fake:
        env = {"DAILY_TOKENS_PER_SERVER": "1000000", "MAX_HISTORY_MESSAGES": "1000"}
        async with runtime(tmp_path, fake, **env) as rt:
            await chat(rt, 3)
            summary = asyncio.ensure_future(rt.memory.compact_now(KEY, force=True))

            async def summary_in_flight() -> bool:
                return bool(bodies(fake, summary=True))

            await poll(summary_in_flight, "the summary never reached the model")
            reply = await asyncio.wait_for(
                ask(rt, msg(9, "still there?", mention=True)), 10)
            assert reply is not None and not reply.failed  # did not wait 30 s for it
            assert not summary.done()  # both were admitted: their reservations fit
            summary.cancel()
            with pytest.raises(asyncio.CancelledError):
                await summary
