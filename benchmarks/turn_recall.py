"""Turn search benchmark: ``search_turns`` + ``turns_at`` at 1,000,000 stored turns in one
channel (SQLite), the common-term bound's trade-off, and ingest with vs without the index.

``python -m benchmarks.turn_recall [--quick] [--turns N] [--ingest N] [--rounds N]``

* **build**: one channel of ``--turns`` turns (plus a channel a tenth of its size beside
  it) bulk-inserted in one transaction with the store's own ``INSERT`` (so the index
  triggers run), from a Zipf-distributed 50,000-word vocabulary, some Korean, and one
  order number per 50 turns. Reports the build time.
* **latency**: what a reply's recall step does: ``query_terms`` of a realistic message,
  ``search_turns`` (40 turns), then ``turns_at`` for the best 8 and their neighbours (±1).
  p50/p99 through the store's API (aiosqlite's thread hop included), after a warm-up.
* **bound**: the same queries at several values of SQLite's ``turn_search.COMMON_DOCS``
  (the number of turns above which a query term is left out): latency, and recall quality as "known
  item" search: 3 random words of a stored turn plus 6 words of Zipf noise as the
  question; is that turn among the 40 found?
* **ingest**: ``SqliteStore.record()`` throughput (WAL, synchronous=FULL, 64 producers
  over 64 channels, group commit), on a file with the index triggers and on one where
  they were dropped, alternating, in the same run: the best rate of each, and the least
  CPU time per turn (the process's, both threads), which moves less with other load.

Not a test: the numbers depend on the machine (2 shared cores here).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from memory.archive import FOLLOW_UP, FOLLOW_UP_DOCS
from memory.models import ChannelKey, NewTurn
from memory.search_text import query_terms, terms
from memory.stores.sqlite import turn_search
from memory.stores.sqlite.queries import _INSERT_TURN
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.turn_search import drain, register

KEY = ChannelKey("discord", "g1", "big")
OTHER = ChannelKey("discord", "g1", "noise")
KOREAN = ["마감은", "배포를", "주문이", "환불", "회의록",
          "서버가", "일정", "결제", "고객님", "문서"]
BOUNDS = (500, 1_000, 2_000, 5_000, 10_000, 20_000)


class Words:
    """A Zipf vocabulary: a few words very common, most rare, as in chat."""

    def __init__(self, rng: random.Random, size: int = 50_000) -> None:
        self.rng = rng
        self.words = [f"w{n}{rng.choice('abcdefgh')}" for n in range(size)] + KOREAN
        self.cum = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(self.words))))

    def sentence(self, n: int) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.cum, k=n))

    def text(self, seq: int) -> str:
        text = self.sentence(self.rng.randint(6, 24))
        return f"{text} order ORD-{seq}" if seq % 50 == 0 else text


def build(path: Path, turns: int, words: Words) -> dict[int, str]:
    """Bulk-insert both channels in one transaction; return a sample of KEY's texts."""
    conn = sqlite3.connect(path, isolation_level=None)
    register(conn)
    conn.execute("BEGIN")
    sample: dict[int, str] = {}
    for key, n in ((KEY, turns), (OTHER, turns // 10)):
        (cid,) = conn.execute(
            "INSERT INTO channels (platform, workspace, channel, next_seq, folded_through) "
            "VALUES (?, ?, ?, ?, ?) RETURNING id",
            (key.platform, key.workspace, key.channel, n + 1, n),
        ).fetchone()
        rows = []
        for seq in range(1, n + 1):
            text = words.text(seq)
            if key == KEY and seq % max(1, n // 200) == 7:
                sample[seq] = text
            rows.append((cid, seq, f"m{seq}", "user", "u1", "User", text,
                         len(text) // 4 + 1, seq * 30.0))  # about its tokens
            if len(rows) == 10_000:
                conn.executemany(_INSERT_TURN, rows)
                rows = []
        conn.executemany(_INSERT_TURN, rows)
    drain(conn)  # what the store's writer does before each COMMIT
    conn.execute("COMMIT")
    conn.close()
    return sample


async def recall(store: SqliteStore, message: str, before: int) -> list[int]:
    """One reply's recall step (as ``memory.archive.Archive.view`` does it: the passes of
    ``common.turn_tiers`` with the message's every word as the fallback, then the
    follow-up search on the best hit's own words); returns the seqs found."""
    query = query_terms(message)
    found = await store.search_turns(KEY, query, before_seq=before, limit=40,
                                     fallback=query_terms(message, common=True))
    if found:
        words = [t for t in query_terms(found[0].text) if t not in set(query)]
        if words:
            more = await store.search_turns(KEY, words, before_seq=before, limit=FOLLOW_UP,
                                            max_docs=FOLLOW_UP_DOCS)
            found = list({t.seq: t for t in [found[0], *more, *found[1:]]}.values())
    around = {s + d for t in found[:8] for s in (t.seq,) for d in (-1, 0, 1)}
    await store.turns_at(KEY, sorted(around))
    return [t.seq for t in found]


WARM = 20
"""Messages that warm the page cache before timing; they are not timed themselves (the
store keeps common terms' counts between searches: timing them again would flatter it)."""


async def timed(store: SqliteStore, messages: Sequence[str], before: int) -> list[float]:
    for m in messages[:WARM]:
        await recall(store, m, before)
    out = []
    for m in messages[WARM:]:
        started = time.perf_counter()
        await recall(store, m, before)
        out.append(time.perf_counter() - started)
    return out


def pct(xs: Sequence[float], p: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000


async def bound_table(store: SqliteStore, words: Words, sample: dict[int, str], before: int,
                      messages: Sequence[str]) -> list[str]:
    """Latency and known-item recall at each bound."""
    questions = []
    for seq, text in sample.items():
        own = sorted(set(terms(text).split()))
        mine = words.rng.sample(own, min(3, len(own)))
        questions.append((seq, " ".join(mine + words.sentence(6).split())))
    rows, default = [], turn_search.COMMON_DOCS  # SQLite's own bound
    try:
        for bound in BOUNDS:
            turn_search.COMMON_DOCS = bound
            lat = await timed(store, messages, before)
            hits = sum([seq in await recall(store, q, before) for seq, q in questions])
            label = f"{bound:,}"
            mark = " (default)" if bound == default else ""
            print(f"  bound {label}: p99 {pct(lat, 99):.1f} ms", file=sys.stderr, flush=True)
            rows.append(f"| {label}{mark} | {pct(lat, 50):.2f} ms | {pct(lat, 99):.2f} ms | "
                        f"{hits}/{len(questions)} ({100 * hits / len(questions):.0f}%) |")
    finally:
        turn_search.COMMON_DOCS = default
    return rows


async def ingest(path: Path, n: int, producers: int = 64) -> tuple[float, float]:
    """record() throughput (turns/s) with ``producers`` concurrent channels, and the
    process's CPU time per turn (µs; both threads): on a shared machine the second moves
    less with the other load than the first."""
    words = Words(random.Random(3))
    texts = [words.text(i) for i in range(n)]
    async with SqliteStore(path) as store:
        async def produce(p: int) -> None:
            key = ChannelKey("discord", "g", f"c{p}")
            for i in range(p, n, producers):
                await store.record(NewTurn(key, f"m{i}", "user", "u", "U", texts[i], 20, i))

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(produce(p) for p in range(producers)))
        return n / (time.perf_counter() - started), (time.process_time() - cpu) / n * 1e6


async def ingest_table(tmp: Path, n: int, rounds: int) -> list[str]:
    rates: dict[str, list[float]] = {"with": [], "without": []}
    cpus: dict[str, list[float]] = {"with": [], "without": []}
    for r in range(rounds):
        for variant in ("with", "without") if r % 2 == 0 else ("without", "with"):
            path = tmp / f"ingest-{variant}-{r}.db"
            async with SqliteStore(path):
                pass
            if variant == "without":
                conn = sqlite3.connect(path)
                for trigger in ("insert", "delete", "update"):  # as gistbot was before
                    conn.execute(f"DROP TRIGGER turns_fts_{trigger}")
                conn.commit()
                conn.close()
            rate, cpu = await ingest(path, n)
            rates[variant].append(rate)
            cpus[variant].append(cpu)
            print(f"  ingest {variant}: {rate:,.0f} turns/s, {cpu:.1f} µs CPU/turn",
                  file=sys.stderr, flush=True)
    best = {v: max(x) for v, x in rates.items()}
    least = {v: min(x) for v, x in cpus.items()}
    return [
        f"| with the turn index (triggers) | {best['with']:,.0f} turns/s | "
        f"{least['with']:.1f} µs | {', '.join(f'{x:,.0f}' for x in rates['with'])} |",
        f"| triggers dropped (as before) | {best['without']:,.0f} turns/s | "
        f"{least['without']:.1f} µs | {', '.join(f'{x:,.0f}' for x in rates['without'])} |",
        f"| ratio with / without | {best['with'] / best['without']:.2f} | "
        f"{least['without'] / least['with']:.2f} (CPU without / with) | |",
    ]


async def main(turns: int, n_queries: int, n_ingest: int, rounds: int) -> None:
    rng = random.Random(7)
    words = Words(rng)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        path = tmp / "turns.db"
        async with SqliteStore(path):  # creates the schema
            pass
        started = time.perf_counter()
        sample = build(path, turns, words)
        built = time.perf_counter() - started
        size = path.stat().st_size + (path.with_suffix(".db-wal").stat().st_size
                                      if path.with_suffix(".db-wal").exists() else 0)
        messages = [words.sentence(rng.randint(4, 25)) for _ in range(WARM + n_queries)]
        messages += [f"what about ORD-{rng.randrange(50, turns, 50)}?" for _ in range(20)]
        async with SqliteStore(path) as store:
            lat = await timed(store, messages, turns + 1)
            bounds = await bound_table(store, words, sample, turns + 1, messages)
        ingest_rows = await ingest_table(tmp, n_ingest, rounds) if n_ingest > 0 else []
    print(f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}")
    print(f"\nbuilt {turns:,} turns (+{turns // 10:,} in another channel) in {built:.1f} s "
          f"({(turns * 1.1) / built:,.0f} turns/s, triggers on), file {size / 2**20:.0f} MiB")
    print(f"\n| recall per reply, {turns:,} turns in one channel | p50 | p99 | target |")
    print("|---|---:|---:|---|")
    print(f"| query_terms + search_turns(40) + turns_at(best 8 ±1) | {pct(lat, 50):.2f} ms | "
          f"{pct(lat, 99):.2f} ms | p99 < 20 ms |")
    print(f"\n({len(lat)} messages of 4-25 Zipf words, 20 of them asking for an order number)")
    print("\n| turn_search.COMMON_DOCS (terms in more turns are left out) | p50 | p99 | "
          "known-item recall@40 |")
    print("|---|---:|---:|---:|")
    print("\n".join(bounds))
    if ingest_rows:  # --ingest 0: no ingest table
        print(f"\n| ingest: record(), {n_ingest:,} turns, 64 channels | best | least CPU per "
              "turn | runs |")
        print("|---|---:|---:|---|")
        print("\n".join(ingest_rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 turns, 100 queries")
    parser.add_argument("--turns", type=int, default=1_000_000)
    parser.add_argument("--ingest", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=4,
                        help="ingest runs of each variant, alternating (default 4)")
    args = parser.parse_args()
    quick = args.quick
    asyncio.run(main(20_000 if quick else args.turns, 100 if quick else 400,
                     4_000 if quick else args.ingest, 2 if quick else args.rounds))
