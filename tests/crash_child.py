"""The process ``test_crash_safety.py`` kills: records and compacts on a real SQLite file.

Usage: ``python -m tests.crash_child DB_PATH RUN_ID``

It resumes whatever the previous (killed) run left (``MemoryManager.start``), then records
turns forever from several concurrent writers in a few channels, with compaction by a fast
extractive fake model. Protocol on stdout, one flushed line per event:

* ``READY`` once the store is open;
* ``A <channel> <message_id>`` after ``record()`` returned: the turn is acknowledged;
* ``S <channel>`` when a summarizer call starts, ``K <channel> <ok>`` after a commit returned.

Every turn's text carries a unique identifier ``ORD-<number>``, so the parent can check
that whatever the fold pointer covers is represented in the summary or the facts.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from memory.config import MemoryConfig
from memory.manager import MemoryManager
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.window import WindowPolicy
from tests.fakes.models import Call, ScriptedModel, extractive

CHANNELS = [ChannelKey("discord", "g", f"c{i}") for i in range(3)]
WRITERS_PER_CHANNEL = 2
SUMMARY_TOKENS = 300


class QuarterTokenizer:
    """About four characters a token: loading a real BPE would dominate each run's start."""

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4

    def truncate(self, text: str, max_tokens: int) -> str:
        return text[: max(max_tokens, 0) * 4]


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def announce(call: Call) -> None:
    """Print ``S <channel>`` as a summarizer call starts."""
    request = call.request
    channel = request.blocks[0][1].split()[1].rstrip(":") if request.blocks else "?"
    emit(f"S {channel}")


class FastModel(ScriptedModel):
    """Extractive summaries at once; yields to the loop so kills land mid-compaction too."""

    def __init__(self) -> None:
        super().__init__(then=extractive(QuarterTokenizer()), on_call=announce, yields=3)


class LoggingStore(SqliteStore):
    async def commit_summary(self, key: ChannelKey, **kw: Any) -> bool:
        ok = await super().commit_summary(key, **kw)
        emit(f"K {key.channel} {int(ok)}")
        return ok


async def writer(mgr: MemoryManager, key: ChannelKey, run: str, w: int) -> None:
    n = 0
    while True:
        mid = f"{run}-{w}-{n}"
        text = f"in {key.channel}: order ORD-{int(run) * 10**7 + w * 10**6 + n} is noted."
        await mgr.record(NewTurn(key, mid, "user", f"u{w}", f"User {w}", text, 0, float(n)))
        emit(f"A {key.channel} {mid}")
        n += 1


async def main(path: str, run: str) -> None:
    store = LoggingStore(path)  # synchronous=FULL, as in production
    await store.open()
    tok = QuarterTokenizer()
    mgr = MemoryManager(
        store,
        Summarizer(FastModel(), tok, summary_tokens=SUMMARY_TOKENS),
        tok,
        WindowPolicy(max_messages=10, keep_messages=4),
        config=MemoryConfig(retry_base=0.01,
            # A killed run leaves its lease behind; keep its expiry short so the next run can
            # compact soon (a real restart waits at most the default 30 s).
            lease_ttl=0.3,
            lease_wait=0.05,
        ),
    )
    await mgr.start()
    emit("READY")
    tasks = [
        asyncio.create_task(writer(mgr, key, run, c * WRITERS_PER_CHANNEL + w))
        for c, key in enumerate(CHANNELS)
        for w in range(WRITERS_PER_CHANNEL)
    ]
    await asyncio.gather(*tasks)  # runs until the parent kills us


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
