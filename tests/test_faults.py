"""Fault injection: every fault has one defined outcome.

For each fault — the LLM answering 429, 500, hanging, resetting the connection, sending
malformed JSON, an empty or an enormous answer; the database locked, read-only or full;
Discord refusing a send; Slack answering 429 or ``invalid_auth`` — the test checks that it is
logged once with context, the person is told briefly (when the platform lets us say
anything), memory is intact, and the next message is served normally once the fault clears,
without a restart.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.discord.text import plan_reply
from adapters.slack.text import format_reply
from bot.app import Runtime
from bot.conversation.service import MAX_REPLY_CHARS, STORE_FAILED
from bot.errors import (
    LLMBadResponse,
    LLMError,
    LLMRateLimited,
    LLMTimeout,
    LLMUnavailable,
)
from bot.settings import load_settings
from tests.fakes.openai_server import (
    EmptyChoices,
    Error,
    FakeOpenAI,
    Hang,
    Malformed,
    Scripted,
    Text,
    rate_limited,
)
from tests.fakes.slack_api import api_error
from tests.fakes.slack_api import rate_limited as slack_rate_limited
from tests.harness.chat import ask
from tests.harness.checks import records
from tests.harness.discord import (
    W,
    has_turns,
    make_settings,
    mention,
    posted,
    running,
    turns,
)
from tests.harness.proxy import ResettingProxy
from tests.harness.service import KEY, msg, runtime
from tests.harness.slack import (
    FakeLLM,
    Harness,
)
from tests.harness.slack import mention as slack_mention


async def texts(rt: Runtime) -> list[tuple[str, str]]:
    return [(t.role, t.text) for t in await rt.store.turns(KEY)]


# ---------------------------------------------------------------------- the language model

LLM_FAULTS: dict[str, tuple[Scripted, type[LLMError]]] = {
    "429": (rate_limited("0"), LLMRateLimited),
    "500": (Error(500, {"error": {"message": "upstream exploded", "type": "server_error"}}),
            LLMUnavailable),
    "timeout": (Hang(30), LLMTimeout),
    "malformed-json": (Malformed(), LLMBadResponse),
    "empty-answer": (Text(""), LLMBadResponse),
    "no-choices": (EmptyChoices(), LLMBadResponse),
}


@pytest.mark.parametrize("fault", list(LLM_FAULTS))
async def test_llm_fault_is_told_logged_once_and_recovers(
    tmp_path: Path, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    step, error = LLM_FAULTS[fault]
    caplog.set_level(logging.INFO)
    async with FakeOpenAI() as fake, runtime(tmp_path, fake, LLM_TIMEOUT="0.5") as rt:
        await ask(rt, msg(1, "order ORD-1 shipped"))
        fake.push(step)
        reply = await ask(rt, msg(2, "where is my order?", mention=True))
        assert reply is not None and reply.failed
        assert reply.text == error.user_message
        logged = records(caplog, logging.ERROR, "reply in", str(KEY))
        assert len(logged) == 1 and error.__name__ in logged[0]
        assert await texts(rt) == [("user", "order ORD-1 shipped"),
                                   ("user", "where is my order?")]
        fake.push("It shipped.")
        again = await ask(rt, msg(3, "and now?", mention=True))
        assert again is not None and not again.failed and again.text == "It shipped."
        assert [t for _, t in await texts(rt)][-2:] == ["and now?", "It shipped."]
        assert len(records(caplog, logging.ERROR)) == 1


async def test_llm_connection_reset_is_told_and_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with FakeOpenAI() as fake, ResettingProxy(int(fake.base_url.split(":")[2][:-3])) as px:
        async with runtime(tmp_path, fake, OPENAI_BASE_URL=px.base_url) as rt:
            px.resets = 1
            reply = await ask(rt, msg(1, "hello?", mention=True))
            assert px.reset_done == 1
            assert reply is not None and reply.failed
            assert reply.text == LLMUnavailable.user_message
            (logged,) = records(caplog, logging.ERROR, "reply in", str(KEY))
            assert "LLMUnavailable" in logged
            fake.push("back again")
            again = await ask(rt, msg(2, "hello again?", mention=True))
            assert again is not None and again.text == "back again"
            assert await texts(rt) == [("user", "hello?"), ("user", "hello again?"),
                                       ("assistant", "back again")]


async def test_an_enormous_answer_is_cut_stored_and_sent_in_bounded_pieces(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # The message window: the huge answer alone must not start a compaction here.
    async with FakeOpenAI() as fake, runtime(tmp_path, fake, MAX_HISTORY_MESSAGES="10") as rt:
        fake.push("paragraph of nonsense. " * 20_000)  # 460,000 characters
        reply = await ask(rt, msg(1, "say a lot", mention=True))
        assert reply is not None and not reply.failed
        assert MAX_REPLY_CHARS < len(reply.text) < MAX_REPLY_CHARS + 100
        assert reply.text.endswith("more characters not kept]")
        stored = (await rt.store.turns(KEY))[-1]
        assert stored.role == "assistant" and stored.text == reply.text
        assert len(records(caplog, logging.WARNING, f"characters; cut to {MAX_REPLY_CHARS}")) == 1
        plan = plan_reply(reply.text)
        assert len(plan.messages) == 4 and plan.attachment is not None
        assert len(format_reply(reply.text)) <= MAX_REPLY_CHARS // 2000


# ---------------------------------------------------------------------- the database

@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Another process-like writer holding the database's write lock."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


async def _set_writer_pragma(rt: Runtime, pragma: str) -> None:
    writer = rt.store._w  # type: ignore[attr-defined]  # the store's one writer connection
    await writer.execute(f"PRAGMA {pragma}")


async def _db_fault_round(rt: Runtime, llm: FakeLLM, caplog: pytest.LogCaptureFixture,
                          start: object, stop: object, big: bool = False) -> None:
    """The common script: history, fault on, two messages, fault off, re-delivery works.

    Each unsaved message is logged with its id (at DEBUG for a fault the store reports
    itself once a minute: read-only, full; at ERROR otherwise)."""
    caplog.set_level(logging.DEBUG, logger="bot.conversation.service")
    await ask(rt, msg(1, "the code word is heron"))
    before = await texts(rt)
    body = "x" * 300_000 if big else ""
    assert callable(start) and callable(stop)
    await start()
    try:
        quiet = await ask(rt, msg(2, f"not for the bot {body}"))
        told = await ask(rt, msg(3, f"what is the code word? {body}", mention=True))
    finally:
        await stop()
    assert quiet is None
    assert told is not None and told.failed and told.text == STORE_FAILED
    assert llm.reply_calls == 0  # nothing unsaved is answered
    logged = records(caplog, logging.DEBUG, "could not record message")
    assert len(logged) == 2 and any("m3" in m and str(KEY) in m for m in logged)
    assert await texts(rt) == before  # nothing half-written, nothing lost
    # The platform re-delivers (or the person repeats): served normally, no restart.
    llm.replies.append("heron")
    again = await ask(rt, msg(3, "what is the code word?", mention=True))
    assert again is not None and not again.failed and again.text == "heron"
    assert await texts(rt) == [*before, ("user", "what is the code word?"),
                               ("assistant", "heron")]


def _settings(tmp_path: Path, db: Path | None = None) -> object:
    return load_settings({"DATABASE_URL": f"sqlite:///{db or tmp_path / 'faults.db'}"},
                         env_file=None)


@pytest.mark.usefixtures("quick_busy_timeout")
async def test_database_locked_by_another_writer(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    path = tmp_path / "faults.db"
    async with Runtime.open(_settings(tmp_path), llm=llm) as rt:  # type: ignore[arg-type]
        lock = exclusive_lock(path)

        async def on() -> None:
            lock.__enter__()

        async def off() -> None:
            lock.__exit__(None, None, None)

        await _db_fault_round(rt, llm, caplog, on, off)
        assert any("locked" in m for m in records(caplog, logging.ERROR, "could not record"))


async def test_database_read_only(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with Runtime.open(_settings(tmp_path), llm=llm) as rt:  # type: ignore[arg-type]
        async def on() -> None:
            await _set_writer_pragma(rt, "query_only = 1")

        async def off() -> None:
            await _set_writer_pragma(rt, "query_only = 0")

        await _db_fault_round(rt, llm, caplog, on, off)
        reported = records(caplog, logging.ERROR, "(read-only)")
        assert len(reported) == 1 and "readonly" in reported[0]  # once, not per message


async def test_database_full_by_page_limit(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with Runtime.open(_settings(tmp_path), llm=llm) as rt:  # type: ignore[arg-type]
        async def on() -> None:
            writer = rt.store._w  # type: ignore[attr-defined]
            (pages,), = await writer.execute_fetchall("PRAGMA page_count")
            await _set_writer_pragma(rt, f"max_page_count = {pages}")

        async def off() -> None:
            await _set_writer_pragma(rt, "max_page_count = 1073741823")

        await _db_fault_round(rt, llm, caplog, on, off, big=True)
        assert len(records(caplog, logging.ERROR, "(disk full)")) == 1  # once, not per message


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs (root only); visible skip where mounting is not permitted."""
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.decode().strip()}); "
                    "test_database_full_by_page_limit covers the full disk")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
async def test_database_full_disk_on_a_small_tmpfs(
    tmp_path: Path, small_disk: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    filler = small_disk / "filler"
    async with Runtime.open(_settings(tmp_path, small_disk / "g.db"), llm=llm) as rt:  # type: ignore[arg-type]
        async def on() -> None:
            with filler.open("wb", buffering=0) as fh, contextlib.suppress(OSError):
                while True:  # until ENOSPC
                    fh.write(b"\0" * 65536)
                    os.fsync(fh.fileno())

        async def off() -> None:
            filler.unlink()

        await _db_fault_round(rt, llm, caplog, on, off, big=True)
        reported = records(caplog, logging.ERROR, "the database cannot store anything now")
        assert len(reported) == 1 and "(disk full)" in reported[0]  # once, not per message


# ---------------------------------------------------------------------- Discord

async def test_discord_forbidden_on_send_keeps_memory_and_recovers(
    tmp_path: Path, discord_fake: object, discord_llm: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.fakes.discord_server import FakeDiscord

    assert isinstance(discord_fake, FakeDiscord)
    caplog.set_level(logging.WARNING, logger="adapters.discord.client")
    discord_fake.forbidden_channels.add(W.general)  # the cache says yes, Discord says 403
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        for i in range(2):
            await discord_fake.send_message(W.general, W.alice, mention(f"question {i}"),
                                            mentions=[W.bot_user])
        await watch.until(lambda: has_turns(rt, 4))
        await discord_fake.wait_for(lambda f: len(f.sent_to(W.general)) >= 2)
        warned = records(caplog, logging.WARNING, "#general", "'Send Messages'")
        assert len(warned) == 1  # once per channel, not per message
        assert sorted(r for r, _, _ in await turns(rt)) == ["assistant"] * 2 + ["user"] * 2
        discord_fake.forbidden_channels.discard(W.general)
        await discord_fake.send_message(W.general, W.bob, mention("fixed now?"),
                                        mentions=[W.bot_user])
        answers = await posted(discord_fake, W.general, 3)
        assert "fixed now?" in answers[2].json["content"]
        assert len(await turns(rt)) == 6


# ---------------------------------------------------------------------- Slack

async def test_slack_429_is_retried_then_a_persistent_one_logged_once(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    h.fake.script("chat.postMessage", slack_rate_limited(0))  # retried after Retry-After
    assert await h.event(slack_mention()) == 200
    await h.settle()
    assert h.fake.calls_to("chat.update")[0].params["text"] == "Hello from the model."
    assert records(caplog, logging.ERROR) == []

    # Four 429s outlast slack_sdk's three retries: the placeholder is lost (logged once),
    # the answer still goes out as a plain post.
    h.fake.script("chat.postMessage", *[slack_rate_limited(0)] * 4)
    assert await h.event(slack_mention("<@UBOT> again", ts="1700000001.000100"),
                         event_id="Ev2") == 200
    await h.settle()
    failed = records(caplog, logging.ERROR, "chat.postMessage", "ratelimited")
    assert len(failed) == 1 and "C1" in failed[0]
    assert [c.params["text"] for c in h.fake.calls_to("chat.postMessage")][-1] == (
        "Hello from the model.")
    assert [t.role for t in await h.turns()] == ["user", "assistant"] * 2


async def test_slack_invalid_auth_on_send_keeps_memory_and_recovers(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    h.fake.script("chat.postMessage", api_error("invalid_auth"), api_error("invalid_auth"))
    assert await h.event(slack_mention()) == 200
    await h.settle()
    failed = records(caplog, logging.ERROR, "chat.postMessage", "invalid_auth")
    assert len(failed) == 2  # the placeholder and the fallback post: each logged once
    assert all("C1" in f for f in failed)
    assert [t.role for t in await h.turns()] == ["user", "assistant"]
    # The token works again (re-issued): the next mention is answered normally.
    assert await h.event(slack_mention("<@UBOT> hello?", ts="1700000002.000100"),
                         event_id="Ev2") == 200
    await h.settle()
    assert h.fake.calls_to("chat.update")[-1].params["text"] == "Hello from the model."
    assert [t.role for t in await h.turns()] == ["user", "assistant"] * 2


async def test_slack_users_info_invalid_auth_still_records_by_id(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    h.fake.script("users.info", api_error("invalid_auth"))
    assert await h.event(slack_mention("hi all", kind="message", user="U1")) == 200
    await h.settle()
    (turn,) = await h.turns()
    assert (turn.author_id, turn.author_name, turn.text) == ("U1", "U1", "hi all")
    assert len(records(caplog, logging.WARNING, "users.info for U1 failed")) == 1
