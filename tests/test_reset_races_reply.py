"""The message being answered is forgotten meanwhile — ``/reset``, or its author deletes it:
the answer made from it does not bring it back into memory.

A mention is being answered (the model holds its answer); an admin runs ``/reset`` in the
channel, or the author deletes the mention; then the model answers. The answer still
reaches the person (it was asked for), but neither the question nor the answer is in memory
afterwards, and no reply stays owed. Real slack-bolt/slack_sdk against the loopback Slack,
on a real SQLite file and on the real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import storage_for_url
from memory.models import NewTurn, RecordResult
from tests.harness.postgres import PG, fresh_schema, reachable
from tests.harness.slack import KEY, FakeLLM, Harness, mention, open_harness


async def _reset(h: Harness, ts: str) -> None:
    status, _ = await h.command("/reset", user="U2")  # U2 is a workspace admin
    assert status == 200
    await h.fake.wait_for("response_url:reset")


async def _delete(h: Harness, ts: str) -> None:
    deleted = {"type": "message", "subtype": "message_deleted", "hidden": True,
               "channel": "C1", "ts": f"{time.time():.6f}", "deleted_ts": ts,
               "previous_message": {"type": "message", "user": "U1", "text": "x", "ts": ts}}
    assert await h.event(deleted, event_id="Ev2") == 200
    deadline = time.monotonic() + 10
    while [t for t in await h.turns() if t.role == "user"]:
        assert time.monotonic() < deadline, "the deletion was not applied"
        await asyncio.sleep(0.01)


FORGET = {"reset": _reset, "deleted": _delete}


@contextlib.asynccontextmanager
async def _database(backend: str, tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    """The settings' ``DATABASE_URL`` for ``backend`` (none: the harness's SQLite file)."""
    if backend == "sqlite":
        yield {}
        return
    assert reachable(), f"PostgreSQL is not listening at {PG}"
    async with fresh_schema() as url:
        yield {"DATABASE_URL": url}


async def _owed(backend: str, tmp_path: Path, env: dict[str, str]) -> int:
    if backend == "sqlite":
        with contextlib.closing(sqlite3.connect(tmp_path / "gistbot.db")) as db:
            return int(db.execute("SELECT count(*) FROM owed_replies").fetchone()[0])
    asyncpg = pytest.importorskip("asyncpg")
    conn = await asyncpg.connect(PG)
    try:
        schema = env["DATABASE_URL"].rsplit("#", 1)[1]
        return int(await conn.fetchval(f'SELECT count(*) FROM "{schema}".owed_replies'))
    finally:
        await conn.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("forget", FORGET)
async def test_a_message_forgotten_while_answered_stays_forgotten(
    forget: str, backend: str, tmp_path: Path
) -> None:
    llm = FakeLLM()
    llm.gate = asyncio.Event()
    async with _database(backend, tmp_path) as env, open_harness(tmp_path, llm, env) as h:
        ts = f"{time.time():.6f}"
        event = mention("<@UBOT> the launch code is 0451, remember it", ts=ts)
        assert await h.event(event) == 200
        await asyncio.wait_for(llm.entered.wait(), 10)  # the model is answering
        await FORGET[forget](h, ts)
        llm.gate.set()
        await h.settle()
        assert [m.get("text") for m in h.fake.bot_messages(KEY.channel)] == [llm.default]
        assert await h.turns() == []
        assert await _owed(backend, tmp_path, env) == 0


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_reset_from_another_replica_just_before_the_answer_is_stored(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reset lands after everything the reply path checks and right before the answer's
    insert: another replica on the same database forgets the channel then. The answer is
    still not stored, since the insert itself is conditional on the question being stored."""
    llm = FakeLLM()
    async with _database(backend, tmp_path) as env, open_harness(tmp_path, llm, env) as h:
        replica = storage_for_url(env.get("DATABASE_URL", f"sqlite:///{tmp_path / 'gistbot.db'}"))
        await replica.open()
        try:
            store = h.rt.memory.store
            insert = store.record
            resets: list[int] = []

            async def reset_first(turn: NewTurn) -> RecordResult:
                if turn.role == "assistant":  # the answer: the question is stored until now
                    assert [t.message_id for t in await replica.memory.turns(KEY)] != []
                    resets.append((await replica.memory.reset(KEY)).turns)
                return await insert(turn)

            monkeypatch.setattr(store, "record", reset_first)
            ts = f"{time.time():.6f}"
            event = mention("<@UBOT> the launch code is 0451, remember it", ts=ts)
            assert await h.event(event) == 200
            await h.settle()
        finally:
            await replica.close()
        assert resets == [1]  # the replica's reset took the question, just before the insert
        assert [m.get("text") for m in h.fake.bot_messages(KEY.channel)] == [llm.default]
        assert await h.turns() == []
        assert await _owed(backend, tmp_path, env) == 0
