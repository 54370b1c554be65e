"""WAL checkpoints run on the checkpointer's own connection, never inside a writer's
COMMIT (``memory.stores.sqlite.checkpointer``): a ``record()`` no longer waits 40-200 ms
behind SQLite's automatic checkpoint of a 1,000-page log."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memory.models import ChannelKey
from memory.stores.sqlite.store import SqliteStore
from tests.harness.store_contract import new_turn

KEY = ChannelKey("discord", "g1", "c1")


async def test_commits_never_checkpoint_and_the_checkpointer_copies_the_log(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wal.db"
    async with SqliteStore(path, checkpoint_interval=0.05) as store:
        [(auto,)] = await store._w.execute_fetchall(  # type: ignore[union-attr]
            "PRAGMA wal_autocheckpoint")
        assert auto == 0  # the writer's COMMITs leave the log alone
        long = "words that fill pages " * 60
        wal = path.parent / "wal.db-wal"

        async def fill(tag: str) -> int:
            for i in range(300):  # well past SQLite's own 1,000-page checkpoint
                await store.record(new_turn(KEY, f"{tag}{i}", f"{i} {long}"))
            return wal.stat().st_size

        first = await fill("a")
        assert first > 1000 * 4096
        for _ in range(200):  # the checkpointer runs 50 ms after the last commit
            if store.checkpointer.checkpoints:
                break
            await asyncio.sleep(0.02)
        assert store.checkpointer.checkpoints > 0
        await asyncio.sleep(0.1)  # and finishes copying
        # The log was copied into the database file, so SQLite starts it over instead of
        # growing it (without checkpoints it would be twice as long now).
        assert await fill("b") <= first * 1.2
        assert len(await store.pending(KEY, limit=1000)) == 600


async def test_an_in_memory_store_has_no_checkpointer_to_run() -> None:
    async with SqliteStore(":memory:", checkpoint_interval=0.01) as store:
        await store.record(new_turn(KEY, "m1", "hello"))
        await asyncio.sleep(0.05)
        assert store.checkpointer.checkpoints == 0
