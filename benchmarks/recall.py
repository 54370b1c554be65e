"""Retrieval benchmark: what recall adds to a reply in a channel with 100,000 archived turns.

``python -m benchmarks.recall [--quick] [--turns N]``

Builds one channel's archive the way compaction would leave it (one episode per 7 folded
turns, one long-term fact per 20 turns, a Zipf-distributed 3,000-word vocabulary plus some
Korean), with a second, noisy channel beside it, then times ``MemoryManager``'s retrieval
step (``query_terms`` + ``Store.search``) for realistic messages, and, as the baseline in
the same run, a reply that does not retrieve (``RECALL_TOKENS=0``: nothing to do). Prints
p50/p99 in milliseconds with the machine. Not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from memory.models import ChannelKey, NewEpisode, NewLongTermFact
from memory.search_text import query_terms
from memory.stores.sqlite.archive import insert_channel_fact, insert_episode
from memory.stores.sqlite.store import SqliteStore

KEY = ChannelKey("discord", "g1", "big")
OTHER = ChannelKey("discord", "g1", "noise")
KOREAN = ["마감", "배포", "주문", "환불", "회의", "서버", "일정", "결제", "고객", "문서"]


def vocabulary(rng: random.Random, size: int = 3000) -> tuple[list[str], list[float]]:
    words = [f"w{n}{rng.choice('abcdefgh')}" for n in range(size)] + KOREAN
    weights = [1.0 / (rank + 1) for rank in range(len(words))]  # Zipf
    return words, weights


def sentence(rng: random.Random, words: list[str], weights: list[float], n: int) -> str:
    return " ".join(rng.choices(words, weights, k=n))


def build(path: Path, turns: int, rng: random.Random) -> None:
    """Write the archive with the store's own insert helpers, in one transaction."""
    words, weights = vocabulary(rng)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    ids = {}
    for key in (KEY, OTHER):
        (ids[key],) = conn.execute(
            "INSERT INTO channels (platform, workspace, channel, next_seq, folded_through) "
            "VALUES (?, ?, ?, ?, ?) RETURNING id",
            (key.platform, key.workspace, key.channel, turns + 1, turns),
        ).fetchone()
    for key in (KEY, OTHER):
        n = turns if key == KEY else turns // 4
        for seq in range(1, n + 1, 7):
            text = sentence(rng, words, weights, 40)
            episode = NewEpisode(seq, seq + 6, seq * 60.0, seq * 60.0 + 400, ("Alice", "Bob"), text)
            insert_episode(conn, ids[key], episode)
        for seq in range(1, n + 1, 20):
            fact = NewLongTermFact(sentence(rng, words, weights, 12), (seq,), "Alice")
            insert_channel_fact(conn, ids[key], fact, seq * 60.0)
    conn.execute("COMMIT")
    conn.close()


async def measure(path: Path, queries: list[str]) -> list[float]:
    store = SqliteStore(path)
    await store.open()
    try:
        for q in queries[:20]:  # warm the page cache
            await store.search(KEY, query_terms(q))
        out = []
        for q in queries:
            started = time.perf_counter()
            await store.search(KEY, query_terms(q))
            out.append(time.perf_counter() - started)
        return out
    finally:
        await store.close()


def pct(xs: list[float], p: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


async def main(turns: int, n_queries: int) -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "recall.db"
        store = SqliteStore(path)  # creates the schema
        await store.open()
        await store.close()
        started = time.perf_counter()
        build(path, turns, rng)
        print(f"built {turns:,} archived turns in {time.perf_counter() - started:.1f}s")
        words, weights = vocabulary(rng)
        queries = [sentence(rng, words, weights, rng.randint(4, 25)) for _ in range(n_queries)]
        timings = await measure(path, queries)
    cpu = platform.processor() or platform.machine()
    print(
        f"\nmachine: {os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}"
    )
    print(f"\n| retrieval per reply, {turns:,} archived turns | p50 | p99 | target |")
    print("|---|---:|---:|---|")
    print(
        f"| gistbot recall (query_terms + FTS5 search) | {pct(timings, 50):.2f} ms | "
        f"{pct(timings, 99):.2f} ms | p99 < 5 ms |"
    )
    print("| baseline: RECALL_TOKENS=0 (no retrieval) | 0.00 ms | 0.00 ms | |")
    print(f"\nmean {statistics.mean(timings) * 1000:.2f} ms over {len(timings)} queries")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 turns, 100 queries")
    parser.add_argument("--turns", type=int, default=100_000)
    args = parser.parse_args()
    turns = 10_000 if args.quick else args.turns
    asyncio.run(main(turns, 100 if args.quick else 400))
