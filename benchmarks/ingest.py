"""Ingest benchmark: ``record()`` throughput and latency across 1,000 channels, ``view()``
cost at 100 vs 10,000 turns, side by side with a bare aiosqlite baseline.

Run ``python -m benchmarks.ingest`` (about a minute) or ``--quick`` (a few seconds). It
prints Markdown: the machine, then the tables. What is measured:

* **gistbot**: ``MemoryManager.record()`` on a ``SqliteStore`` file (WAL,
  ``synchronous=FULL``): text cleaning, token counting (o200k), the durable group commit,
  the per-record compaction check. Two columns: **compaction on** (default window 10/4)
  with an instant fake summary model that returns a fixed text, so the numbers include
  compaction work (reads, prompt building, identifier checks, conditional commits) but no
  model time; and **compaction off** (a window of 1,000,000 messages; the manager still
  checks the window after every record, and that check counts the unfolded turns, so
  its cost grows with the backlog).
* **store alone**: ``SqliteStore.record()`` called directly (no manager), to separate the
  storage cost from the manager's.
* **baseline**: one aiosqlite connection, one ``INSERT`` committed per turn (autocommit),
  same pragmas (WAL, ``synchronous=FULL``), same columns and idempotency index.
* **closed loop**: every channel has one producer that records back to back, so the store
  is saturated: turns/s is the capacity; latency is queueing (Little's law: about
  channels / throughput).
* **open loop**: turns arrive at a fixed rate (``--rate``, default 10,000/s) spread over
  the channels; latency at that offered load is what a user's message sees.
* **view**: ``MemoryManager.view()`` median over many calls for a channel with 100 and
  one with 10,000 recorded turns, both kept compacted (the normal state), plus the same
  with compaction lagging (all turns unfolded) for reference.

Benchmarks are not tests: nothing here asserts; the targets are printed beside the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import aiosqlite

from memory.completion import ChatMessage
from memory.manager import MemoryManager
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter
from memory.window import WindowPolicy

__all__ = [
    "Measured",
    "Run",
    "baseline_record",
    "build_channel",
    "closed_loop",
    "gistbot_record",
    "main",
    "measure_gistbot",
    "open_baseline",
    "open_gistbot",
    "open_loop",
    "run",
    "store_record",
    "view_medians",
]

Record = Callable[[ChannelKey, int, int], Awaitable[None]]
WORDS = ("deploy", "lunch", "review", "the build", "coffee", "tomorrow", "standup", "docs",
         "the tests", "a meeting", "release notes", "the dashboard")


@dataclass
class Run:
    """One measured phase: how many turns, how long, each call's latency."""

    turns: int
    seconds: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.turns / self.seconds

    def pct(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


class _Answer:
    def __init__(self, text: str) -> None:
        self.text = text


class InstantModel:
    """A summary model that answers at once with a fixed summary (no model time measured)
    that shares words with every conversation of ``line``, so it is no non-answer."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> _Answer:
        self.calls += 1
        return _Answer("## Topics\n- The team think most of it can wait until after lunch.")


def line(channel: int, n: int) -> str:
    """A short chat message (about 12 tokens), different per channel and turn."""
    a, b = WORDS[(channel + n) % len(WORDS)], WORDS[(channel * 7 + n * 3) % len(WORDS)]
    return f"I think {a} can wait until after {b}, what do you all think?"


def turn(key: ChannelKey, channel: int, n: int) -> NewTurn:
    author = f"u{(channel + n) % 5}"
    return NewTurn(key, f"m{n}", "user", author, author.upper(), line(channel, n), 0, float(n))


# ------------------------------------------------------------------------------ drivers


async def closed_loop(record: Record, keys: list[ChannelKey], per_channel: int) -> Run:
    """Each channel records ``per_channel`` turns back to back; all channels at once."""
    latencies: list[float] = []

    async def producer(i: int, key: ChannelKey) -> None:
        for n in range(per_channel):
            t0 = time.perf_counter()
            await record(key, i, n)
            latencies.append(time.perf_counter() - t0)

    start = time.perf_counter()
    await asyncio.gather(*(producer(i, k) for i, k in enumerate(keys)))
    return Run(len(latencies), time.perf_counter() - start, latencies)


async def open_loop(record: Record, keys: list[ChannelKey], rate: float, total: int,
                    first_n: int) -> Run:
    """``total`` turns arriving at ``rate``/s, round-robin over channels, not waiting for
    earlier ones: the latency a message sees at that load."""
    latencies: list[float] = []

    async def one(k: int) -> None:
        t0 = time.perf_counter()
        await record(keys[k % len(keys)], k % len(keys), first_n + k // len(keys))
        latencies.append(time.perf_counter() - t0)

    tasks: list[asyncio.Task[None]] = []
    start = time.perf_counter()
    while len(tasks) < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        tasks.extend(asyncio.create_task(one(k)) for k in range(len(tasks), due))
        await asyncio.sleep(0.0005)
    await asyncio.gather(*tasks)
    return Run(total, time.perf_counter() - start, latencies)


# ------------------------------------------------------------------------------ systems


async def open_gistbot(path: Path, tok: TokenCounter,
                       policy: WindowPolicy | None = None) -> tuple[SqliteStore, MemoryManager]:
    store = SqliteStore(path, synchronous="FULL")
    await store.open()
    model = InstantModel()
    mgr = MemoryManager(store, Summarizer(model, tok), tok, policy)
    return store, mgr


def store_record(store: SqliteStore) -> Record:
    async def record(key: ChannelKey, channel: int, n: int) -> None:
        t = turn(key, channel, n)
        await store.record(NewTurn(t.key, t.message_id, t.role, t.author_id, t.author_name,
                                   t.text, len(t.text) // 4, t.sent_at))

    return record


def gistbot_record(mgr: MemoryManager) -> Record:
    async def record(key: ChannelKey, channel: int, n: int) -> None:
        await mgr.record(turn(key, channel, n))

    return record


async def open_baseline(path: Path) -> aiosqlite.Connection:
    conn = await aiosqlite.connect(path, isolation_level=None)  # autocommit: one txn per turn
    await conn.execute("PRAGMA journal_mode = WAL")
    await conn.execute("PRAGMA synchronous = FULL")
    await conn.execute(
        "CREATE TABLE turns (channel TEXT NOT NULL, seq INTEGER NOT NULL, message_id TEXT NOT "
        "NULL, role TEXT NOT NULL, author_id TEXT NOT NULL, author_name TEXT NOT NULL, text "
        "TEXT NOT NULL, tokens INTEGER NOT NULL, sent_at REAL NOT NULL, "
        "PRIMARY KEY (channel, seq)) WITHOUT ROWID"
    )
    await conn.execute("CREATE UNIQUE INDEX turns_message ON turns (channel, message_id)")
    return conn


def baseline_record(conn: aiosqlite.Connection) -> Record:
    async def record(key: ChannelKey, channel: int, n: int) -> None:
        t = turn(key, channel, n)
        await conn.execute(
            "INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (str(key), n, t.message_id, t.role, t.author_id, t.author_name, t.text,
             len(t.text) // 4, t.sent_at),
        )

    return record


@dataclass
class Measured:
    """The gistbot phases of one configuration."""

    closed: Run
    opened: Run
    compactions: int
    turns: int
    pending: int


async def measure_gistbot(path: Path, tok: TokenCounter, policy: WindowPolicy | None,
                          keys: list[ChannelKey], per_channel: int, rate: float,
                          open_total: int) -> Measured:
    store, mgr = await open_gistbot(path, tok, policy)
    closed = await closed_loop(gistbot_record(mgr), keys, per_channel)
    await mgr.wait_idle()
    opened = await open_loop(gistbot_record(mgr), keys, rate, open_total, per_channel)
    await mgr.wait_idle()
    stats = await store.stats(keys[0])
    await mgr.close()
    await store.close()
    return Measured(closed, opened, mgr.compactions, stats.turns, stats.pending)


# ------------------------------------------------------------------------------ view


async def build_channel(mgr: MemoryManager, key: ChannelKey, n: int, *, idle: bool) -> None:
    """Record ``n`` turns in concurrent chunks; with ``idle``, let compaction catch up."""
    chunk = 250
    for start in range(0, n, chunk):
        await asyncio.gather(*(mgr.record(turn(key, 0, i))
                               for i in range(start, min(n, start + chunk))))
        if idle:
            await mgr.wait_idle()


async def view_medians(mgr: MemoryManager, keys: tuple[ChannelKey, ChannelKey],
                       rounds: int) -> tuple[float, float]:
    """Median ``view()`` seconds for each key, calls interleaved so drift hits both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(20):  # warm caches and code paths
        for key in keys:
            await mgr.view(key, 4000)
    for _ in range(rounds):
        for key, out in zip(keys, times, strict=True):
            t0 = time.perf_counter()
            await mgr.view(key, 4000)
            out.append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


# ------------------------------------------------------------------------------ report


def machine(db_dir: Path) -> list[str]:
    from benchmarks.common import cpu_model

    model = cpu_model()
    fs = "unknown"
    try:
        mounts = [r.split() for r in Path("/proc/mounts").read_text().splitlines()]
        best = max((m for m in mounts if str(db_dir.resolve()).startswith(m[1])),
                   key=lambda m: len(m[1]))
        fs = f"{best[2]} ({best[1]})"
    except (OSError, ValueError):
        pass
    return [
        f"- CPU: {model}, {os.cpu_count()} cores",
        f"- Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"aiosqlite {metadata.version('aiosqlite')}, {platform.system()} {platform.release()}",
        f"- database files in {db_dir} on {fs}",
    ]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def p50_99(r: Run) -> str:
    return f"{ms(r.pct(50))} / {ms(r.pct(99))}"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs"


async def run(args: argparse.Namespace) -> str:
    quick = args.quick
    channels = args.channels
    per_channel = args.turns_per_channel or (10 if quick else 40)
    open_total = int(args.rate * (1.0 if quick else 4.0))
    base_closed_per_channel = 2 if quick else 5
    base_open_total = 2_000 if quick else 5_000
    rounds = 300 if quick else 2_000

    tok = TokenCounter("gpt-4o")
    keys = [ChannelKey("discord", "bench", f"c{i}") for i in range(channels)]
    if args.tune_gc:
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        db_dir = Path(tmp)
        out = ["# gistbot ingest benchmark", "", *machine(db_dir),
               f"- garbage collector: {'tuned (--tune-gc)' if args.tune_gc else 'default'}", ""]

        # -- gistbot: closed then open loop on one file; compaction on, then off
        on = await measure_gistbot(db_dir / "gistbot.db", tok, None, keys, per_channel,
                                   args.rate, open_total)
        off_policy = WindowPolicy(max_messages=1_000_000, keep_messages=4)
        off = await measure_gistbot(db_dir / "no-compaction.db", tok, off_policy, keys,
                                    per_channel, args.rate, open_total)

        # -- the store alone
        store = SqliteStore(db_dir / "store.db", synchronous="FULL")
        await store.open()
        s_closed = await closed_loop(store_record(store), keys, per_channel)
        s_open = await open_loop(store_record(store), keys, args.rate, open_total, per_channel)
        await store.close()

        # -- baseline
        conn = await open_baseline(db_dir / "baseline.db")
        b_closed = await closed_loop(baseline_record(conn), keys, base_closed_per_channel)
        b_open = await open_loop(baseline_record(conn), keys, args.rate, base_open_total,
                                 base_closed_per_channel)
        await conn.close()

        # -- view: compacted (normal) and lagging (no compaction)
        small, big = ChannelKey("d", "v", "small"), ChannelKey("d", "v", "big")
        store, mgr = await open_gistbot(db_dir / "view.db", tok)
        await build_channel(mgr, small, 100, idle=True)
        await build_channel(mgr, big, 10_000, idle=True)
        v_small, v_big = await view_medians(mgr, (small, big), rounds)
        pend = (len(await store.pending(small)), len(await store.pending(big)))
        await mgr.close()
        await store.close()
        lag_policy = WindowPolicy(max_messages=1_000_000, keep_messages=4)
        store, mgr = await open_gistbot(db_dir / "lag.db", tok, lag_policy)
        await build_channel(mgr, small, 100, idle=False)
        await build_channel(mgr, big, 10_000, idle=False)
        l_small, l_big = await view_medians(mgr, (small, big), rounds // 2)
        await mgr.close()
        await store.close()

    out += [
        f"{channels} channels. Closed loop: one producer per channel, {per_channel} turns each "
        f"(gistbot, store) / {base_closed_per_channel} each (baseline). Open loop: "
        f"{args.rate:,.0f} turns/s offered, {open_total:,} turns (gistbot, store) / "
        f"{base_open_total:,} (baseline). "
        "Every acknowledged turn is committed (WAL, synchronous=FULL).",
        "",
        "| | `MemoryManager.record()`, compaction on | same, compaction off | "
        "`SqliteStore.record()` alone | bare aiosqlite INSERT+COMMIT | target |",
        "|---|---:|---:|---:|---:|---|",
        f"| closed loop: durable turns/s | {on.closed.rate:,.0f} | {off.closed.rate:,.0f} | "
        f"{s_closed.rate:,.0f} | {b_closed.rate:,.0f} | ≥ 10,000 |",
        f"| closed loop: record() p50 / p99 | {p50_99(on.closed)} | {p50_99(off.closed)} | "
        f"{p50_99(s_closed)} | {p50_99(b_closed)} | (queueing ≈ channels ÷ turns/s) |",
        f"| open loop: achieved turns/s | {on.opened.rate:,.0f} | {off.opened.rate:,.0f} | "
        f"{s_open.rate:,.0f} | {b_open.rate:,.0f} | {args.rate:,.0f} offered |",
        f"| open loop: record() p50 / p99 | {p50_99(on.opened)} | {p50_99(off.opened)} | "
        f"{p50_99(s_open)} | {p50_99(b_open)} | p99 < 10 ms |",
        "",
        f"Compaction on: {on.compactions:,} summaries committed by the instant fake model; "
        f"channel {keys[0].channel} ended with {on.turns} turns, {on.pending} unfolded. "
        f"Compaction off: window of 1,000,000 messages ({off.compactions} summaries).",
        "",
        "| `view()` (budget 4,000 tokens), median | 100 turns | 10,000 turns | ratio | target |",
        "|---|---:|---:|---:|---|",
        f"| compacted (unfolded: {pend[0]} / {pend[1]}) | {us(v_small)} | {us(v_big)} | "
        f"{v_big / v_small:.2f}x | ≤ 1.2x |",
        f"| compaction lagging (all unfolded) | {us(l_small)} | {us(l_big)} | "
        f"{l_big / l_small:.2f}x | (reference) |",
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse options, run the benchmark, print the Markdown report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ingest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few seconds instead of a minute")
    parser.add_argument("--channels", type=int, default=1000)
    parser.add_argument("--turns-per-channel", type=int, default=0,
                        help="closed-loop turns per channel (default 40, quick 10)")
    parser.add_argument("--rate", type=float, default=10_000.0,
                        help="open-loop offered turns per second")
    parser.add_argument("--dir", default=None, help="where to put the database files")
    parser.add_argument("--tune-gc", action="store_true",
                        help="gc.freeze() after start-up and a higher gen-0 threshold, as an "
                        "application may do: shows how much of the p99 is garbage collection")
    print(asyncio.run(run(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
