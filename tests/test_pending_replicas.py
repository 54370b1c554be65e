"""Two runtimes on one database (replicas) recording into one channel at once: the unfolded
size each record reads in its own transaction (``RecordResult.pending``, what compaction
checks instead of a read of its own) counts every turn committed before it, so the last
record of an overflow always sees the overflow (SQLite file and PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.models import ChannelKey
from tests.compaction_child import open_store
from tests.harness.postgres import fresh_schema
from tests.harness.store_contract import new_turn

KEY = ChannelKey("slack", "T1", "C1")


@pytest.fixture(params=["sqlite", "postgres"])
async def spec(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "shared.db")
        return
    async with fresh_schema("gistbot_pend") as url:
        yield url


async def test_records_racing_on_two_runtimes_each_count_every_earlier_turn(spec: str) -> None:
    stores = [open_store(spec), open_store(spec)]
    for store in stores:
        await store.open()
    try:
        results = await asyncio.gather(*(
            stores[i % 2].record(new_turn(KEY, f"m{i}", f"message {i}", tokens=3))
            for i in range(40)))
        assert all(r.created for r in results)
        first = min(r.turn.seq for r in results)
        for r in results:  # every turn with a lower seq was committed and is counted
            assert r.pending == (r.turn.seq - first + 1, 3 * (r.turn.seq - first + 1))
        assert max(r.pending or (0, 0) for r in results) == await stores[0].pending_size(KEY)
    finally:
        for store in stores:
            await store.close()
