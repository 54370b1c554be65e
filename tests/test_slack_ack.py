"""Acknowledge after commit (issue 14): Slack's 200 (HTTP mode) or envelope ack (Socket
Mode) is sent only once the message's turn is committed, the reply runs after it, and a
store failure withholds the acknowledgement so Slack delivers again — never stored twice.

The faults are real: a SQLite database made read-only (``PRAGMA query_only`` on the
writer's connection: SQLite's own SQLITE_READONLY), a disk filled up (a tiny tmpfs when the
tests may mount one, else SQLite's ``max_page_count``: SQLITE_FULL either way), and, for
the Socket Mode ordering tests, a store whose commit is held or refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack import run_slack
from bot.app import Runtime
from bot.conversation.service import STORE_FAILED
from bot.settings import load_settings
from memory.errors import StoreUnavailableError
from memory.models import NewTurn, RecordResult
from memory.stores.faults import REPORT
from memory.stores.sqlite.store import SqliteStore
from tests.fakes.slack_api import FakeSlack
from tests.harness.slack import (
    KEY,
    FakeLLM,
    Harness,
    directory,
    environ,
    event_body,
    mention,
    open_harness,
    posts,
    web_client,
)

TS0 = 1700000000


def ts(i: int) -> str:
    return f"{TS0 + i}.000100"


def plain(i: int, text: str = "just chatting") -> dict[str, Any]:
    return mention(f"{text} {i}", ts=ts(i), kind="message")


def addressed(i: int) -> dict[str, Any]:
    return mention(f"<@UBOT> question {i}?", ts=ts(i), kind="message")


def told(fake: FakeSlack) -> list[str]:
    """What the bot said in the channel: its posts and what it put into them."""
    return [c.params["text"] for c in fake.calls_to("chat.postMessage")
            + fake.calls_to("chat.update")]


def stored_ids(db: Path) -> list[str]:
    """Message ids of the channel's turns, read from the file by another connection."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT message_id FROM turns ORDER BY seq").fetchall()
    return [str(r[0]) for r in rows]


@pytest.fixture(autouse=True)
def fresh_report() -> Iterator[None]:
    REPORT.reset()  # another test's fault must not make this one's report quiet
    yield
    REPORT.reset()


# ---------------------------------------------------------------- HTTP: the ordering


async def test_http_ack_waits_for_the_commit_but_not_for_the_reply(
    tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_harness(tmp_path, llm, {}) as h:
        commit = asyncio.Event()
        real = h.rt.store.record

        async def held(turn: NewTurn) -> RecordResult:
            if turn.role == "user":
                await commit.wait()
            return await real(turn)

        monkeypatch.setattr(h.rt.store, "record", held)
        llm.gate = asyncio.Event()  # the model never answers until released
        sending = asyncio.create_task(h.event(addressed(1), event_id="Ev1"))
        await asyncio.sleep(0.3)
        assert not sending.done(), "acknowledged before the turn was committed"
        commit.set()
        assert await asyncio.wait_for(sending, 5) == 200
        assert stored_ids(tmp_path / "gistbot.db") == [ts(1)]  # durable when Slack hears 200
        await asyncio.wait_for(llm.entered.wait(), 5)
        assert posts(h.fake) == []  # the reply is after the ack, still waiting on the model
        llm.gate.set()
        await h.settle()
        assert [c.params["text"] for c in h.fake.calls_to("chat.update")] == [llm.default]


async def _refusing(h: Harness, monkeypatch: pytest.MonkeyPatch) -> Callable[[bool], None]:
    """Make ``h``'s store refuse user turns (a full disk) until the switch says otherwise."""
    state = {"down": True}
    real = h.rt.store.record

    async def record(turn: NewTurn) -> RecordResult:
        if state["down"] and turn.role == "user":
            raise StoreUnavailableError("disk full", "database or disk is full")
        return await real(turn)

    monkeypatch.setattr(h.rt.store, "record", record)

    def switch(down: bool) -> None:
        state["down"] = down

    return switch


async def test_http_store_failure_is_503_and_the_redelivery_is_stored_once(
    tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_harness(tmp_path, llm, {}) as h:
        switch = await _refusing(h, monkeypatch)
        # the message event and its app_mention twin: neither is acknowledged
        first = h.event(addressed(1), event_id="Ev1")
        twin = h.event(mention("<@UBOT> question 1?", ts=ts(1)), event_id="Ev1m")
        assert await asyncio.gather(first, twin) == [503, 503]
        assert await h.event(plain(2), event_id="Ev2") == 503
        await h.settle()
        assert stored_ids(tmp_path / "gistbot.db") == []
        assert told(h.fake) == [STORE_FAILED]  # the person who asked is told, once
        assert await h.event(addressed(1), event_id="Ev1", retry=1) == 503
        await h.settle()
        assert told(h.fake) == [STORE_FAILED]  # not told again on the retry
        switch(False)
        for _ in range(2):  # Slack's next retry, and one more (as after a lost 200)
            assert await h.event(addressed(1), event_id="Ev1", retry=2) == 200
            assert await h.event(plain(2), event_id="Ev2", retry=1) == 200
        await h.settle()
        ids = stored_ids(tmp_path / "gistbot.db")
        assert sorted(ids) == sorted([ts(1), f"reply:{ts(1)}", ts(2)])
        assert llm.reply_calls == 1


# ---------------------------------------------------------------- Socket Mode


def envelope(eid: str, event: dict[str, Any], retry: int = 0) -> dict[str, Any]:
    return {"envelope_id": eid, "type": "events_api", "accepts_response_payload": False,
            "retry_attempt": retry, "retry_reason": "timeout" if retry else "",
            "payload": event_body(event, event_id=f"Ev-{eid}")}  # fmt: skip


@contextlib.asynccontextmanager
async def socket_mode(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[tuple[FakeSlack, Runtime]]:
    async with FakeSlack() as fake:
        directory(fake)
        env = environ(tmp_path, SLACK_APP_TOKEN=fake.app_token)
        del env["SLACK_SIGNING_SECRET"]
        settings = load_settings(environ=env, env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            stop = asyncio.Event()
            client = web_client(settings, fake.api_url)
            task = asyncio.create_task(
                run_slack(rt.features, rt.settings, client=client, stop=stop)
            )
            try:
                yield fake, rt
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)


def acked(fake: FakeSlack, eid: str) -> bool:
    return any(m.get("envelope_id") == eid for m in fake.socket_received)


async def test_socket_mode_ack_follows_the_commit_and_is_withheld_on_failure(
    tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with socket_mode(tmp_path, llm) as (fake, rt):
        state = {"down": False}
        commit = asyncio.Event()
        real = rt.store.record

        async def record(turn: NewTurn) -> RecordResult:
            if turn.role == "user":
                await commit.wait()
                if state["down"]:
                    raise StoreUnavailableError("read-only", "attempt to write a readonly database")
            return await real(turn)

        monkeypatch.setattr(rt.store, "record", record)
        llm.gate = asyncio.Event()
        await fake.socket_send(envelope("env-1", plain(1)))
        await asyncio.sleep(0.3)
        assert not acked(fake, "env-1"), "acknowledged before the turn was committed"
        commit.set()
        await fake.wait_socket_ack("env-1")
        assert stored_ids(tmp_path / "gistbot.db") == [ts(1)]
        # a mention: acked once stored, while the model is still thinking
        await fake.socket_send(envelope("env-2", addressed(2)))
        await fake.wait_socket_ack("env-2")
        assert llm.reply_calls <= 1 and not fake.calls_to("chat.update")
        llm.gate.set()
        await fake.wait_for("chat.update")
        # the store fails: no ack (Slack sends it again), and nothing stored
        state["down"] = True
        await fake.socket_send(envelope("env-3", plain(3)))
        await fake.socket_send(envelope("env-4", plain(4)))  # a later envelope is answered
        await asyncio.sleep(0.5)
        assert not acked(fake, "env-3") and not acked(fake, "env-4")
        state["down"] = False
        await fake.socket_send(envelope("env-3b", plain(3), retry=1))
        await fake.wait_socket_ack("env-3b")
        assert sorted(stored_ids(tmp_path / "gistbot.db")) == sorted(
            [ts(1), ts(2), f"reply:{ts(2)}", ts(3)]
        )


# ---------------------------------------------------------------- real SQLite faults


def _tmpfs(path: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` on ``path``; False when this process may not mount."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True)  # fmt: skip
    return done.returncode == 0


@contextlib.contextmanager
def tiny_disk(tmp_path: Path) -> Iterator[tuple[Path, bool]]:
    """A folder for the database: a 4 MB tmpfs when mountable (True), else plain (False)."""
    disk = tmp_path / "disk"
    mounted = _tmpfs(disk, "4m")
    try:
        yield disk, mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(path: Path) -> None:
    """Write zeros to ``path`` until the disk says it is full."""
    with open(path, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()


def _writer_conn(rt: Runtime) -> Any:
    store = rt.store
    assert isinstance(store, SqliteStore)
    return store._w  # the writer's connection: the fault must hit the real write path


def _fault_lines(caplog: pytest.LogCaptureFixture, cause: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.ERROR and f"({cause})" in r.getMessage()]  # fmt: skip


async def _twelve_events(h: Harness, first: int) -> dict[str, int]:
    """Ten plain messages and two mentions, as Slack sends them; event id -> status."""
    out: dict[str, int] = {}
    for i in range(first, first + 12):
        event = addressed(i) if i in (first + 3, first + 8) else plain(i)
        out[f"Ev{i}"] = await h.event(event, event_id=f"Ev{i}")
    return out


async def _redeliver(h: Harness, first: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in range(first, first + 12):
        event = addressed(i) if i in (first + 3, first + 8) else plain(i)
        out[f"Ev{i}"] = await h.event(event, event_id=f"Ev{i}", retry=1)
    return out


def _check_no_ack_lost(db: Path, statuses: dict[str, int], first: int) -> None:
    stored = set(stored_ids(db))
    for i in range(first, first + 12):
        if statuses[f"Ev{i}"] == 200:
            assert ts(i) in stored, f"event {i} was acknowledged but not stored"
    ids = stored_ids(db)
    assert len(ids) == len(set(ids)), "a turn was stored twice"


async def test_read_only_database_acknowledges_nothing_and_recovers(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with open_harness(tmp_path, llm, {}) as h:
        db = tmp_path / "gistbot.db"
        assert await h.event(plain(0), event_id="Ev0") == 200
        await _writer_conn(h.rt).execute("PRAGMA query_only = 1")  # SQLITE_READONLY
        statuses = await _twelve_events(h, 1)
        await h.settle()
        assert set(statuses.values()) == {503}
        _check_no_ack_lost(db, statuses, 1)
        assert stored_ids(db) == [ts(0)]
        assert told(h.fake) == [STORE_FAILED, STORE_FAILED]  # each mention's author, once
        assert len(_fault_lines(caplog, "read-only")) == 1  # once a minute, not per event
        assert not [r for r in caplog.records if "could not record" in r.getMessage()
                    and r.levelno >= logging.WARNING]  # fmt: skip
        await _writer_conn(h.rt).execute("PRAGMA query_only = 0")
        statuses = await _redeliver(h, 1)
        await h.settle()
        assert set(statuses.values()) == {200}
        ids = stored_ids(db)
        assert sorted(i for i in ids if not i.startswith("reply:")) == sorted(
            ts(i) for i in range(0, 13))
        assert len(ids) == len(set(ids)) == 13 + 2  # and the two mentions answered
        assert any("accepts writes again" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
async def test_full_disk_acknowledges_nothing_and_recovers(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with tiny_disk(tmp_path) as (disk, mounted):
        async with open_harness(disk, llm, {}) as h:
            db = disk / "gistbot.db"
            assert await h.event(plain(0), event_id="Ev0") == 200
            filler = disk / "filler"
            if mounted:  # fill the tmpfs to the last byte: a real ENOSPC
                await asyncio.to_thread(fill, filler)
            else:  # no mount here: SQLite's page limit gives the same SQLITE_FULL
                conn = _writer_conn(h.rt)
                pages = (await (await conn.execute("PRAGMA page_count")).fetchone())[0]
                await conn.execute(f"PRAGMA max_page_count = {pages}")
            statuses: dict[str, int] = {}
            for n in range(3):  # enough text that new pages are needed
                for i in range(1 + 12 * n, 13 + 12 * n):
                    body = plain(i, "x" * 3000) if i % 12 not in (4, 9) else addressed(i)
                    statuses[f"Ev{i}"] = await h.event(body, event_id=f"Ev{i}")
            await h.settle()
            failed = [e for e, s in statuses.items() if s != 200]
            assert failed, "the disk never filled up"
            assert set(statuses.values()) <= {200, 503}
            stored = set(stored_ids(db))
            for e, s in statuses.items():
                if s == 200:
                    assert ts(int(e[2:])) in stored, f"{e} acknowledged but not stored"
            assert len(_fault_lines(caplog, "disk full")) + len(
                _fault_lines(caplog, "disk I/O error")) >= 1
            assert len(_fault_lines(caplog, "disk full")) <= 1
            # room again: Slack's re-deliveries are stored, each once
            if mounted:
                filler.unlink()
            else:
                await _writer_conn(h.rt).execute("PRAGMA max_page_count = 1073741823")
            for e in failed:
                i = int(e[2:])
                body = plain(i, "x" * 3000) if i % 12 not in (4, 9) else addressed(i)
                assert await h.event(body, event_id=e, retry=1) == 200
            await h.settle()
            ids = stored_ids(db)
            users = [i for i in ids if not i.startswith("reply:")]
            assert sorted(users) == sorted(ts(i) for i in range(0, 37))
            assert len(ids) == len(set(ids))
            assert await h.turns(KEY)
    assert json.dumps(statuses)  # keep the figures printable on failure
