"""Single-flight compaction across OS processes sharing one store (SQLite file or PostgreSQL):
two processes racing make exactly one summarizer call per overflow, and a process killed while
holding the compaction lease blocks the channel only until the lease expires."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.models import ChannelKey
from memory.store import Store
from tests.compaction_child import open_store
from tests.harness.children import ended
from tests.harness.postgres import fresh_schema
from tests.harness.store_contract import new_turn

ROOT = Path(__file__).resolve().parent.parent
KEY = ChannelKey("discord", "g1", "c1")


@pytest.fixture(params=["sqlite", "postgres"])
async def spec(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "shared.db")
        return
    async with fresh_schema("gistbot_mp") as url:
        yield url


async def seed(spec: str, n: int) -> Store:
    store = open_store(spec)
    await store.open()
    for i in range(n):
        await store.record(new_turn(KEY, f"m{i}", f"message {i} about order ORD-{100 + i}"))
    return store


async def child(spec: str, log: Path, mode: str, ttl: float) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.compaction_child",
        spec,
        str(log),
        mode,
        str(ttl),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(proc: asyncio.subprocess.Process) -> None:
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "done"


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.slow
async def test_two_processes_racing_make_one_summarizer_call(spec: str, tmp_path: Path) -> None:
    store = await seed(spec, 11)  # one over the default window of 10
    log = tmp_path / "calls.log"
    procs: list[asyncio.subprocess.Process] = []
    try:
        for _ in range(2):
            procs.append(await child(spec, log, "normal", 30.0))
        for proc in procs:
            await finish(proc)
        assert len(calls(log)) == 1, calls(log)
        state = await store.state(KEY)
        assert state.folded_through == 7 and state.compactions == 1
        assert [t.message_id for t in await store.turns(KEY)] == [f"m{i}" for i in range(11)]
    finally:
        await ended(*procs)
        await store.close()


@pytest.mark.slow
async def test_a_killed_lease_holder_blocks_only_until_expiry(spec: str, tmp_path: Path) -> None:
    store = await seed(spec, 11)
    log = tmp_path / "calls.log"
    procs: list[asyncio.subprocess.Process] = []
    try:
        hung = await child(spec, log, "hang", 1.5)
        procs.append(hung)
        deadline = time.monotonic() + 30
        while not calls(log):  # wait until it holds the lease and is mid-summary
            assert time.monotonic() < deadline, "the child never started compacting"
            await asyncio.sleep(0.05)
        hung.send_signal(signal.SIGKILL)
        await hung.wait()
        assert (await store.state(KEY)).compactions == 0  # it died before committing

        taker = await child(spec, log, "normal", 30.0)
        procs.append(taker)
        await finish(taker)
        assert len(calls(log)) == 2  # the dead one's call, then the take-over's
        state = await store.state(KEY)
        assert state.compactions == 1 and state.folded_through == 7
    finally:
        await ended(*procs)
        await store.close()


async def test_lease_is_renewed_while_a_slow_summary_runs(tmp_path: Path) -> None:
    from memory.config import MemoryConfig
    from memory.manager import MemoryManager
    from memory.stores.sqlite.store import SqliteStore
    from memory.summarizer import Summarizer
    from memory.tokens import TokenCounter
    from tests.fakes.models import LoggingModel

    store = await seed(str(tmp_path / "s.db"), 11)
    other = SqliteStore(tmp_path / "s.db")
    await other.open()
    tok = TokenCounter("gpt-4o")

    release = asyncio.Event()
    model = LoggingModel(str(tmp_path / "calls.log"), gate=release)
    manager = MemoryManager(
        store, Summarizer(model, tok, summary_tokens=4000), tok,
        config=MemoryConfig(lease_ttl=0.3, lease_wait=0.05),
    )
    try:
        await manager.start()
        await asyncio.wait_for(model.entered.wait(), 10)
        await asyncio.sleep(1.0)  # three lease lifetimes: only renewal keeps it
        assert not await other.try_lease(KEY, "intruder", ttl=5)
        release.set()
        await manager.wait_idle()
        assert await other.try_lease(KEY, "intruder", ttl=5)  # released after the commit
        assert (await store.state(KEY)).compactions == 1
    finally:
        await manager.close()
        await other.close()
        await store.close()
