"""Daily quotas enforced across OS processes sharing one database (PostgreSQL, or one
SQLite file): two replicas answering the same person at once never take the person past
their limit, and both count into the same daily total; the same for ``/catchup`` under a
server's limit (every kind of call is metered at the one gateway, by reservations made in
the database). A replica killed between reserving and settling holds its reservation until
it expires; then the next reservation reclaims it."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.channels.quota import RESERVATION_TTL, utc_day
from bot.stores.usage import UsageKey
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.harness.children import ended
from tests.harness.deadlines import scaled
from tests.harness.postgres import fresh_schema

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 3000  # a few calls' largest cost (about 1,100 tokens each), many calls' usage
REQUESTS = 12  # per process, all at once


@pytest.fixture(params=["postgres", "sqlite"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The ``DATABASE_URL`` both replicas share."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/shared.db"
        return
    async with fresh_schema("gistbot_quota") as url:
        yield url


async def replica(url: str, base_url: str, channel: str, kind: str,
                  started: list[asyncio.subprocess.Process], requests: int = REQUESTS
                  ) -> asyncio.subprocess.Process:
    """A replica process, added to ``started`` (the test reaps it), once it is ready."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.quota_child", url, base_url, channel, str(requests),
        str(LIMIT), kind, cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    started.append(proc)
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), scaled(60))
    if line.strip() != b"ready":
        proc.kill()
        _, err = await proc.communicate()
        raise AssertionError(f"replica did not start: {line!r} {err.decode()[-2000:]}")
    return proc


async def go(procs: list[asyncio.subprocess.Process]) -> None:
    """Tell every replica to make its calls."""
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()


async def result(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    out, err = await asyncio.wait_for(proc.communicate(), scaled(120))
    assert proc.returncode == 0, err.decode()[-2000:]
    data: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return data


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "account"), [
    ("reply", UsageKey("discord", "g1", "alice")),  # a person's replies
    ("catchup", UsageKey("discord", "g1")),  # a server's catch-ups
])
async def test_two_replicas_never_take_a_quota_past_its_limit(
    database: str, kind: str, account: UsageKey
) -> None:
    # Every answer takes a moment, so the replicas' requests overlap.
    procs: list[asyncio.subprocess.Process] = []
    async with FakeOpenAI(responder=default_responder, latency=lambda _: 0.05) as fake:
        try:
            for channel in ("ca", "cb"):
                await replica(database, fake.base_url, channel, kind, procs)
            await go(procs)
            results = [await result(proc) for proc in procs]
        finally:
            await ended(*procs)
    usages = [u for r in results for u in r["usages"]]
    assert sum(r["answered"] for r in results) == len(usages)

    from bot.app import storage_for_url

    storage = storage_for_url(database, pool_size=2)
    await storage.open()
    try:
        used = (await storage.usage.tokens_used(utc_day(time.time()), [account]))[account]
    finally:
        await storage.close()
    assert used == sum(usages)  # both replicas counted into one total
    assert used <= LIMIT, (used, usages)  # under any concurrency, never past the limit
    assert used > LIMIT // 2  # the quota let the person use most of what they were allowed
    assert len(usages) < 2 * REQUESTS  # and then refused


@pytest.mark.slow
async def test_a_replica_killed_mid_call_holds_its_reservation_until_it_expires(
    database: str,
) -> None:
    alice = UsageKey("discord", "g1", "alice")
    procs: list[asyncio.subprocess.Process] = []
    async with FakeOpenAI(responder=default_responder, latency=lambda _: 60.0) as fake:
        try:
            await replica(database, fake.base_url, "ca", "reply", procs, requests=1)
            await go(procs)
            deadline = time.monotonic() + scaled(30)
            while not fake.chat_requests:  # reserved, and the call is on the wire
                assert time.monotonic() < deadline, "the replica never called the model"
                await asyncio.sleep(0.05)
        finally:
            await ended(*procs)  # SIGKILL: between reserving and settling

    from bot.app import storage_for_url

    storage = storage_for_url(database, pool_size=2)
    await storage.open()
    try:
        now, day = time.time(), utc_day(time.time())

        async def reserve_all(at: float) -> bool:
            refusal = await storage.usage.reserve_tokens(
                day, {alice: LIMIT}, LIMIT, rid=f"probe-{at}", now=at,
                expires_at=at + RESERVATION_TTL)
            assert refusal is None or not refusal.full  # nothing was spent
            return refusal is None

        assert not await reserve_all(now)  # the dead replica's hold is still there
        assert await reserve_all(now + RESERVATION_TTL)  # expired: reclaimed
        assert (await storage.usage.tokens_used(day, [alice]))[alice] == 0
    finally:
        await storage.close()
