"""A separate OS process that resumes compaction on a shared store (multi-process tests).

``python -m tests.compaction_child STORE LOG MODE LEASE_TTL`` where STORE is a SQLite path or
``postgresql://…#schema``; MODE ``normal`` answers after 0.5 s, ``hang`` never answers (the
parent SIGKILLs it while it holds the lease). Every summarizer call appends ``<pid> call``
to LOG before answering, so the parent can count calls across processes.
"""

from __future__ import annotations

import asyncio
import sys

from bot.stores import Storage
from memory.config import MemoryConfig
from memory.manager import MemoryManager
from memory.store import Store
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter
from tests.fakes.models import LoggingModel


def open_store(spec: str) -> Store:
    if spec.startswith("postgresql://"):
        from memory.stores.postgres.store import PostgresStore

        dsn, _, schema = spec.partition("#")
        return PostgresStore(dsn, schema=schema, max_size=2)
    return SqliteStore(spec)


def open_storage(spec: str) -> Storage:
    """``open_store``'s memory store with every storage role composed on it."""
    return Storage.on(open_store(spec))


async def main(spec: str, log: str, mode: str, lease_ttl: float) -> None:
    store = open_store(spec)
    await store.open()
    tok = TokenCounter("gpt-4o")
    summarizer = Summarizer(LoggingModel(log, mode == "hang"), tok, summary_tokens=4000)
    manager = MemoryManager(
        store, summarizer, tok,
        config=MemoryConfig(lease_ttl=lease_ttl, lease_wait=0.1, retry_base=0.1),
    )
    try:
        await manager.start()
        await manager.wait_idle()
    finally:
        await manager.close()
        await store.close()
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
