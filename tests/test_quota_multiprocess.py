"""Daily quotas enforced across OS processes sharing PostgreSQL: two replicas answering the
same person at once overshoot the person's limit by at most one request each, and both
count into the same daily total; the same for ``/catchup`` under a server's limit (every
kind of call is metered at the one gateway)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.channels.quota import utc_day
from bot.stores.usage import UsageKey
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.harness.children import ended
from tests.harness.deadlines import scaled

asyncpg = pytest.importorskip("asyncpg")

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("GISTBOT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
LIMIT = 400
REQUESTS = 12  # per process, all at once


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    name = f"gistbot_quota_{uuid.uuid4().hex[:10]}"
    yield name
    conn = await asyncpg.connect(PG)
    await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    await conn.close()


async def replica(url: str, base_url: str, channel: str,
                  kind: str = "reply") -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.quota_child", url, base_url, channel, str(REQUESTS),
        str(LIMIT), kind, cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), scaled(60))
    except BaseException:
        await ended(proc)
        raise
    if line.strip() != b"ready":
        proc.kill()
        _, err = await proc.communicate()
        raise AssertionError(f"replica did not start: {line!r} {err.decode()[-2000:]}")
    return proc


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
async def test_two_replicas_overshoot_a_quota_by_at_most_one_request_each(
    schema: str, kind: str, account: UsageKey
) -> None:
    url = f"{PG}#{schema}"
    # Every answer takes a moment, so the replicas' requests overlap.
    async with FakeOpenAI(responder=default_responder, latency=lambda _: 0.05) as fake:
        procs: list[asyncio.subprocess.Process] = []
        try:
            for channel in ("ca", "cb"):
                procs.append(await replica(url, fake.base_url, channel, kind))
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(b"go\n")
                await proc.stdin.drain()
            results = [await result(proc) for proc in procs]
        finally:
            await ended(*procs)
    usages = [u for r in results for u in r["usages"]]
    assert sum(r["answered"] for r in results) == len(usages)

    from bot.app import storage_for_url

    storage = storage_for_url(f"{PG}#{schema}", pool_size=2)
    await storage.open()
    try:
        used = (await storage.usage.tokens_used(utc_day(time.time()), [account]))[account]
    finally:
        await storage.close()
    assert used == sum(usages)  # both replicas counted into one total
    assert used >= LIMIT  # the quota let the person use what they were allowed
    assert len(usages) < 2 * REQUESTS  # and then refused
    # Each replica may be one request over, never more: take away each replica's last
    # (largest, to be safe) request and the rest fits under the limit.
    per_request = max(usages)
    assert used - 2 * per_request < LIMIT, (used, usages)
