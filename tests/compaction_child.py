"""A separate OS process that resumes compaction on a shared store (multi-process tests).

``python -m tests.compaction_child STORE LOG MODE LEASE_TTL`` where STORE is a SQLite path or
``postgresql://…#schema``; MODE ``normal`` answers after 0.5 s, ``hang`` never answers (the
parent SIGKILLs it while it holds the lease). Every summarizer call appends ``<pid> call``
to LOG before answering, so the parent can count calls across processes.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from memory.completion import ChatMessage
from memory.config import MemoryConfig
from memory.manager import MemoryManager
from memory.sqlite_store import SqliteStore
from memory.store import Store
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter


@dataclass
class _Answer:
    text: str


class LoggingModel:
    """Writes one line per call to the shared log, then answers (or hangs)."""

    def __init__(self, log: str, hang: bool) -> None:
        self.log, self.hang = log, hang

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> _Answer:
        # One short append, before anything else can happen: blocking is what we want here.
        with open(self.log, "a", encoding="utf-8") as fh:  # noqa: ASYNC230
            fh.write(f"{os.getpid()} call\n")
        if self.hang:
            await asyncio.Event().wait()
        await asyncio.sleep(0.5)
        return _Answer("## Topics\n- turns folded by a child process " + messages[-1]["content"])


def open_store(spec: str) -> Store:
    if spec.startswith("postgresql://"):
        from memory.postgres_store import PostgresStore

        dsn, _, schema = spec.partition("#")
        return PostgresStore(dsn, schema=schema, max_size=2)
    return SqliteStore(spec)


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
