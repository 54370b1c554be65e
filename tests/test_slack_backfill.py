"""Backfill after downtime on Slack: the real slack_sdk client against the fake Slack,
which serves ``conversations.history`` and ``conversations.replies`` (paged) and can answer
429 with ``Retry-After``.

What was posted while the bot was away (top-level messages, new threads, new replies to an
older thread) is read back from the newest stored ``ts``, remembered once, never
answered; over ``BACKFILL_MAX_MESSAGES`` the newest are kept. In Socket Mode the backfill
runs on start and again after every reconnect.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from adapters.backfill import Backfiller
from adapters.slack import run_slack
from adapters.slack.backfill import slack_backfiller
from bot.app import Runtime
from bot.conversation.service import ChatService
from bot.settings import load_settings
from memory.errors import StoreError
from memory.models import ChannelKey, NewTurn
from tests.fakes.slack_api import FakeSlack, api_error, rate_limited
from tests.harness.slack import (
    KEY,
    FakeLLM,
    Harness,
    directory,
    environ,
    mention,
    web_client,
)


async def last_seen(h: Harness, text: str = "we ship on friday") -> dict[str, Any]:
    """A message posted and delivered live (the bot was up): the backfill's cursor."""
    msg = h.fake.post("C1", "U1", text)
    assert await h.event(mention(text, ts=msg["ts"], kind="message")) == 200
    await h.settle()
    return msg


async def backfiller(h: Harness, bound: int = 500) -> Backfiller:
    me = await h.adapter.identify()
    return slack_backfiller(h.adapter.client, me, h.adapter.users, h.rt.service,
                            h.rt.storage.history(), bound)


async def user_ts(h: Harness) -> list[str]:
    return [t.message_id for t in await h.turns() if t.role == "user"]


async def test_history_new_threads_and_older_threads_replies_are_remembered_not_answered(
    h: Harness,
) -> None:
    fake = h.fake
    old_thread = fake.post("C1", "U2", "a thread started before the downtime")
    await h.event(mention("a thread started before the downtime", ts=old_thread["ts"],
                          kind="message", user="U2"))
    first = await last_seen(h)
    # Down: none of these is delivered.
    missed = [fake.post("C1", "U1", "missed one"),
              fake.post("C1", "U2", "<@UBOT> did you see this?")]
    parent = fake.post("C1", "U1", "new thread")
    missed.append(parent)
    missed.append(fake.post("C1", "U2", "a reply in the new thread", thread_ts=parent["ts"]))
    missed.append(fake.post("C1", "U3", "late reply to the old thread",
                            thread_ts=old_thread["ts"]))
    fake.post("C1", "U9", "joined", subtype="channel_join")  # not conversation
    fake.post("C1", "", "a bot says hi", bot_id="B2", subtype="bot_message")
    missed.append(fake.post("C1", "U1", "broadcast reply", thread_ts=parent["ts"],
                            subtype="thread_broadcast"))

    report = (await (await backfiller(h)).run("test"))[0]

    assert await user_ts(h) == [old_thread["ts"], first["ts"]] + [m["ts"] for m in missed]
    assert (report.after, report.new, report.skipped) == (first["ts"], len(missed), 0)
    texts = {t.message_id: t.text for t in await h.turns()}
    assert texts[missed[1]["ts"]] == "@gistbot did you see this?"
    assert {t.author_name for t in await h.turns()} >= {"Alice", "Bob", "Carol"}
    assert not fake.calls_to("chat.postMessage") and h.llm.reply_calls == 0
    (history, lookback) = fake.calls_to("conversations.history")
    assert history.params["oldest"] == first["ts"]
    assert lookback.params["latest"] == first["ts"]
    replied = sorted(c.params["ts"] for c in fake.calls_to("conversations.replies"))
    assert replied == sorted([old_thread["ts"], parent["ts"]])

    # Idempotent: again, nothing new and nothing doubled.
    again = (await (await backfiller(h)).run("test"))[0]
    assert again.new == 0
    assert await user_ts(h) == [old_thread["ts"], first["ts"]] + [m["ts"] for m in missed]


async def test_long_gaps_are_paged_and_a_rate_limited_read_is_retried(h: Harness) -> None:
    fake = h.fake
    await last_seen(h)
    missed = [fake.post("C1", "U1", f"missed {i}") for i in range(230)]
    for i in range(210):
        missed.append(fake.post("C1", "U2", f"reply {i}", thread_ts=missed[5]["ts"]))
    fake.script("conversations.history", rate_limited(0))

    report = (await (await backfiller(h)).run("test"))[0]

    assert (report.new, report.skipped) == (440, 0)
    stored = await user_ts(h)
    assert stored[1:] == sorted((m["ts"] for m in missed), key=float)
    assert len(set(stored)) == len(stored)
    calls = fake.calls_to("conversations.history")
    assert len(calls) == 4  # 429, then two pages since the cursor, then the lookback
    assert calls[1].params.get("cursor") is None and calls[2].params["cursor"] == "next:200"
    assert len(fake.calls_to("conversations.replies")) == 2  # 211 messages: two pages


async def test_over_the_bound_the_newest_are_kept(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.backfill")
    await last_seen(h)
    missed = [h.fake.post("C1", "U1", f"missed {i}") for i in range(80)]

    report = (await (await backfiller(h, bound=50)).run("test"))[0]

    assert (await user_ts(h))[1:] == [m["ts"] for m in missed[30:]]
    assert (report.new, report.skipped) == (50, 30)
    assert any("30 older ones skipped (BACKFILL_MAX_MESSAGES=50)" in r.getMessage()
               for r in caplog.records)


async def test_a_channel_still_rate_limited_is_left_for_next_time(h: Harness) -> None:
    await last_seen(h)
    h.fake.post("C1", "U1", "missed")
    h.fake.script("conversations.history", *[rate_limited(0)] * 4)  # beyond the 3 retries
    assert await (await backfiller(h)).run("test") == []
    assert len(await user_ts(h)) == 1  # nothing half-fetched recorded
    assert len(await (await backfiller(h)).run("test")) == 1
    assert len(await user_ts(h)) == 2


class Backfilled:
    """Counts ``ChatService.backfilled`` calls and wakes waiters on each."""

    def __init__(self, service: ChatService) -> None:
        self.calls = 0
        self._changed = asyncio.Condition()
        original = service.backfilled

        async def wrapped(msg: Any) -> bool:
            try:
                return await original(msg)
            finally:
                self.calls += 1
                async with self._changed:
                    self._changed.notify_all()

        service.backfilled = wrapped  # type: ignore[method-assign]

    async def until(self, n: int, within: float = 10.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: self.calls >= n)


async def test_socket_mode_backfills_on_start_and_after_every_reconnect(
    tmp_path: Path, llm: FakeLLM
) -> None:
    async with FakeSlack() as fake:
        directory(fake)
        env = environ(tmp_path, SLACK_APP_TOKEN=fake.app_token)
        del env["SLACK_SIGNING_SECRET"]
        settings = load_settings(environ=env, env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            first = fake.post("C1", "U1", "last seen before the restart")
            await rt.store.record(NewTurn(KEY, first["ts"], "user", "U1", "Alice",
                                          first["text"], 5, float(first["ts"])))
            down = [fake.post("C1", "U2", "while stopped"),
                    fake.post("C1", "U1", "<@UBOT> while stopped, a mention")]
            seen = Backfilled(rt.service)
            stop = asyncio.Event()
            client = web_client(settings, fake.api_url)
            task = asyncio.create_task(run_slack(rt.features, rt.settings, client=client,
                                                 stop=stop, history=rt.storage.history()))
            try:
                await seen.until(2)
                assert [t.message_id for t in await rt.store.turns(KEY)] == [
                    first["ts"], *(m["ts"] for m in down)]
                assert len(fake.calls_to("conversations.history")) == 2  # one start run
                lost = fake.post("C1", "U2", "while the socket was down")
                await fake.drop_sockets()
                await seen.until(3)
                assert fake.socket_connections == 2
                assert [t.message_id for t in await rt.store.turns(KEY)][-1] == lost["ts"]
                assert fake.calls_to("conversations.history")[2].params["oldest"] == down[1]["ts"]
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)
            assert not fake.calls_to("chat.postMessage") and llm.reply_calls == 0
            assert [t.role for t in await rt.store.turns(KEY)] == ["user"] * 4


async def test_a_channel_the_bot_left_is_skipped_and_other_workspaces_are_not_read(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.slack.backfill")
    await last_seen(h)
    other = NewTurn(ChannelKey("slack", "T0OTHER", "C1"), "1700000000.000001", "user", "U1",
                    "Alice", "elsewhere", 2, 1_700_000_000.0)
    await h.rt.store.record(other)
    h.fake.script("conversations.history", api_error("not_in_channel"))
    assert await (await backfiller(h)).run("test") == []
    assert len(h.fake.calls_to("conversations.history")) == 1  # C1 of T0TEAM only
    assert "skipping Slack channel C1 (not_in_channel)" in caplog.text


async def test_http_mode_backfills_on_start(tmp_path: Path, llm: FakeLLM) -> None:
    async with FakeSlack() as fake:
        directory(fake)
        settings = load_settings(environ=environ(tmp_path, PORT="0"), env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            first = fake.post("C1", "U1", "last seen")
            await rt.store.record(NewTurn(KEY, first["ts"], "user", "U1", "Alice",
                                          first["text"], 2, float(first["ts"])))
            missed = fake.post("C1", "U2", "<@UBOT> missed mention")
            seen = Backfilled(rt.service)
            stop = asyncio.Event()
            task = asyncio.create_task(run_slack(
                rt.features, rt.settings, client=web_client(settings, fake.api_url),
                stop=stop, history=rt.storage.history()))
            try:
                await seen.until(1)
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)
            assert [t.message_id for t in await rt.store.turns(KEY)] == [first["ts"], missed["ts"]]
            assert not fake.calls_to("chat.postMessage") and llm.reply_calls == 0


async def test_a_backfill_cut_short_resumes_from_its_mark_not_from_a_newer_live_message(
    h: Harness,
) -> None:
    first = await last_seen(h)
    missed = [h.fake.post("C1", "U1", f"missed {i}") for i in range(5)]
    store = h.rt.storage.backfill
    service_backfilled = h.rt.service.backfilled

    async def dies(msg: Any) -> bool:  # the store goes away (or the process is killed)
        raise StoreError("disk I/O error")

    h.rt.service.backfilled = dies  # type: ignore[method-assign]
    assert await (await backfiller(h)).run("start") == []
    assert await store.backfill_mark(KEY) == first["ts"]  # durable: survives a restart
    h.rt.service.backfilled = service_backfilled  # type: ignore[method-assign]
    live = await last_seen(h, "a live message, newer than every missed one")

    report = (await (await backfiller(h)).run("restart"))[0]

    assert report.after == first["ts"]  # from the mark, not from the live message
    assert await user_ts(h) == [first["ts"], live["ts"]] + [m["ts"] for m in missed]
    assert await store.backfill_mark(KEY) is None
