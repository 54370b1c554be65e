"""Reply latency of gistbot against the plain memories that share its client, and its view at
a channel's size.

``python -m benchmarks.reply_overhead [--quick] [--turns N] [--reply-latencies S,S]
[--scale-turns N,N] [--full-history]``

**Replies.** Scenario 1's conversation and replies for gistbot and the last-25 window, one
after another, against one loopback fake server and through the same
``bot.llm.client.OpenAILLM``, at each fake reply latency (default 1 s, the first-token time
of hosted models, and 100 ms), and at each under two garbage collector settings: the
interpreter's own, and the one the ``gistbot`` entry point applies once started
(``bot.ops.gc_tuning.tune``: the start-up heap frozen, higher thresholds; applied here once
the fake server and the memory are open, and undone after). Each setting gets a fresh
database and fake server. A reply every 5th message at 100 ms, every 10th at 1 s and
slower (200 replies; the channel's state is the same 2,000 turns). The fake server runs in
this process and keeps no log of its requests here, as a model server in another process
would not weigh on gistbot's collector. Summaries take 50 ms: gistbot waits for idle
compaction before each message (``pace="idle"``), so how long a summary takes moves no
reply.

Prints per memory and setting the reply p50/p95, gistbot's view (``MemoryManager.view``:
snapshot, searches, ranking, composing) p50/p95 and the collections during the replay;
then the ratios against the targets: gistbot's reply p95 ≤ 1.05x the window's at 1 s and
≤ 1.2x at 100 ms.

**The view at scale** (``benchmarks.view_scale``): ``MemoryManager.view(recall=True)`` over
SQLite files of 2,000 and 1,000,000 stored turns of one channel, bulk-built; the ratio of
the p95s against the target ≤ 2x. Runs with the entry point's collector setting.

The machine (CPU model, cores) and the load average at the start and the end are printed:
the numbers depend on both. Not a test. ``--quick`` is a short end-to-end run (checks the
report, not the numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import Config, machine_info, percentile, progress
from benchmarks.conversation import load_conversation
from benchmarks.gistbot_memory import GistbotMemory
from benchmarks.prompt_cost import drive, memory_budget, open_memories
from benchmarks.responder import fake_server
from benchmarks.view_scale import measure
from bot.ops import gc_tuning
from memory.tokens import TokenCounter, ensure_offline_encodings

__all__ = ["TARGETS", "main", "run"]

TARGETS = {1.0: 1.05, 0.1: 1.2}
"""Reply latency of the fake model (s) -> gistbot's reply p95 over the window's, at most."""
SCALE_TARGET = 2.0
"""The view's p95 at the largest size over its p95 at the smallest, at most."""
SETTINGS = ("interpreter", "gistbot")
"""Collector settings: the interpreter's own, and ``gc_tuning.tune`` (the entry point's)."""


@dataclass
class Pauses:
    """The collector's runs during a replay, by generation: how many and how long."""

    count: list[int] = field(default_factory=lambda: [0, 0, 0])
    seconds: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    longest: float = 0.0

    def text(self) -> str:
        runs = "/".join(str(c) for c in self.count)
        return f"{runs} ({sum(self.seconds) * 1000:.0f} ms, longest {self.longest * 1000:.1f})"


@contextlib.contextmanager
def counting(pauses: Pauses) -> Iterator[None]:
    """Count the collector's runs and their durations while the block runs."""
    started = [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        took = time.perf_counter() - started[0]
        g = info["generation"]
        pauses.count[g] += 1
        pauses.seconds[g] += took
        pauses.longest = max(pauses.longest, took)

    gc.callbacks.append(callback)
    try:
        yield
    finally:
        gc.callbacks.remove(callback)


def apply(setting: str) -> gc_tuning.GcSetting:
    """The collector ``setting`` (see ``SETTINGS``), applied now."""
    return gc_tuning.tune() if setting == "gistbot" else gc_tuning.restore()


def _timed_views(mem: GistbotMemory, into: list[float]) -> None:
    """Append the seconds of every ``MemoryManager.view`` call of ``mem``'s runtime."""
    view = mem.rt.memory.view

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await view(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - started)

    mem.rt.memory.view = timed  # type: ignore[method-assign]


@dataclass
class Replay:
    """One memory's replay at one latency and collector setting."""

    memory: str
    latency: float
    setting: str
    samples: list[float]
    views: list[float]
    pauses: Pauses


async def _replay(cfg: Config, memory: str, setting: str) -> Replay:
    """Replay the conversation into a fresh ``memory`` under the collector ``setting``."""
    rows = load_conversation(cfg.turns)
    views: list[float] = []
    pauses = Pauses()
    async with fake_server(cfg) as (fake, responder), open_memories(
            cfg, fake.base_url, which=(memory,)) as mems:
        mem = mems[0]
        if isinstance(mem, GistbotMemory):
            _timed_views(mem, views)

        def forget(_: int) -> None:  # the fake's log: no weight on this process's heap
            fake.requests.clear()
            fake.served.clear()
            responder.calls.clear()

        apply(setting)  # after start-up, as the entry point does
        try:
            with counting(pauses):
                samples = [s for _, s in await drive(mem, rows, cfg.reply_every, forget)]
        finally:
            gc_tuning.restore()
    return Replay(memory, cfg.reply_latency, setting, samples, views, pauses)


def _ms(xs: Sequence[float], p: float) -> str:
    return f"{percentile(xs, p) * 1000:.1f}" if xs else "–"


async def replies(base: Config, latencies: Sequence[float], full_history: bool
                  ) -> tuple[list[str], list[str]]:
    """The replay table and the ratio lines."""
    lines = ["| model latency | collector | memory | replies | reply p50 ms | reply p95 ms | "
             "view p50 ms | view p95 ms | collections young/middle/full (time) |",
             "|---:|---|---|---:|---:|---:|---:|---:|---|"]
    ratios: list[str] = []
    memories = ["gistbot", "last-25 window"] + (["full history"] if full_history else [])
    for latency in latencies:
        every = base.reply_every if latency < 0.5 else 2 * base.reply_every
        cfg = Config(out=base.out, turns=base.turns, reply_latency=latency,
                     summary_latency=base.summary_latency, reply_every=every)
        p95: dict[tuple[str, str], float] = {}
        for setting in SETTINGS:
            for memory in memories:
                r = await _replay(cfg, memory, setting)
                p95[(setting, memory)] = percentile(r.samples, 95)
                progress(f"  {latency * 1000:.0f} ms model, {setting} collector, {memory}: "
                         f"reply p95 {_ms(r.samples, 95)} ms")
                lines.append(
                    f"| {latency * 1000:.0f} ms | {setting} | {memory} | {len(r.samples)} | "
                    f"{_ms(r.samples, 50)} | {_ms(r.samples, 95)} | {_ms(r.views, 50)} | "
                    f"{_ms(r.views, 95)} | {r.pauses.text()} |")
        target = TARGETS.get(latency)
        for setting in SETTINGS:
            ratio = p95[(setting, "gistbot")] / max(p95[(setting, "last-25 window")], 1e-9)
            verdict = ("no target" if target is None else
                       f"target ≤ {target}x, {'met' if ratio <= target else 'missed'}")
            ratios.append(f"reply p95, gistbot / last-25 window, {latency * 1000:.0f} ms model, "
                          f"{setting} collector: {ratio:.3f}x ({verdict})")
    return lines, ratios


async def scale(folder: Path, sizes: Sequence[int], questions: int) -> tuple[list[str], str]:
    """The view-at-scale table and its ratio line."""
    tok = TokenCounter("gpt-4o")
    budget = memory_budget(Config(out=folder))
    asked = [r for r in load_conversation() if r.i % 5 == 0][:questions]
    lines = ["| stored turns | build s | file MiB | views | view p50 ms | view p95 ms | "
             "view CPU p50 ms | view CPU p95 ms |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    p95: dict[int, float] = {}
    cpu95: dict[int, float] = {}
    gc_tuning.tune()
    try:
        for n in sizes:
            s = await measure(folder, n, budget, asked, tok)
            p95[n], cpu95[n] = percentile(s.views, 95), percentile(s.cpu, 95)
            progress(f"  {n:,} stored turns: built in {s.build_seconds:.0f} s, view p95 "
                     f"{_ms(s.views, 95)} ms")
            lines.append(f"| {n:,} | {s.build_seconds:.1f} | {s.file_bytes / 2**20:.0f} | "
                         f"{len(s.views)} | {_ms(s.views, 50)} | {_ms(s.views, 95)} | "
                         f"{_ms(s.cpu, 50)} | {_ms(s.cpu, 95)} |")
    finally:
        gc_tuning.restore()
    small, large = min(sizes), max(sizes)
    ratio = p95[large] / max(p95[small], 1e-9)
    line = (f"view p95, {large:,} / {small:,} stored turns: {ratio:.3f}x "
            f"(target ≤ {SCALE_TARGET}x, {'met' if ratio <= SCALE_TARGET else 'missed'}); "
            f"view CPU p95: {cpu95[large] / max(cpu95[small], 1e-9):.3f}x")
    return lines, line


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


async def run(cfg: Config, latencies: Sequence[float], sizes: Sequence[int], questions: int,
              full_history: bool) -> str:
    """Both parts; return the report after the header."""
    table, ratios = await replies(cfg, latencies, full_history)
    out = [*table, ""]
    if sizes:
        with tempfile.TemporaryDirectory(prefix="gistbot-view-scale-") as tmp:
            scaled, line = await scale(Path(tmp), sizes, questions)
        out += [*scaled, ""]
        ratios.append(line)
    return "\n".join(out + ratios)


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: print the machine, the settings and the tables."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.reply_overhead",
                                description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="60 turns, 1 ms fake latencies, views at 500 and 2,000 stored turns")
    p.add_argument("--turns", type=int, default=2000, help="turns of the conversation")
    p.add_argument("--reply-latencies", default="1,0.1",
                   help="fake reply latencies, s, comma-separated (default 1,0.1)")
    p.add_argument("--summary-latency", type=float, default=0.05,
                   help="fake summary latency, s")
    p.add_argument("--scale-turns", default="2000,1000000",
                   help="stored turns for the view at scale, comma-separated; empty: skip")
    p.add_argument("--questions", type=int, default=220,
                   help="views at each size (the first 20 untimed)")
    p.add_argument("--full-history", action="store_true",
                   help="also replay the full history (every message, each reply)")
    a = p.parse_args(argv)
    if a.quick:
        a.turns, a.reply_latencies, a.summary_latency = 60, "0.001", 0.001
        a.scale_turns, a.questions = "500,2000", 40
    ensure_offline_encodings()
    m = machine_info()
    print(f"machine: {m['cores']} cores, {m['cpu']}, {m['memory_gb']} GB, Python "
          f"{m['python']}; {m['date']}; gistbot {m['commit']}")
    print(f"load average at start: {_load()}")
    print(f"{a.turns} turns; fake summaries {a.summary_latency * 1000:.0f} ms; collector "
          f"settings: interpreter {gc_tuning.DEFAULT_THRESHOLDS}, gistbot "
          f"{gc_tuning.THRESHOLDS} with the start-up heap frozen\n")
    with tempfile.TemporaryDirectory(prefix="gistbot-overhead-") as tmp:
        cfg = Config(out=Path(tmp), turns=a.turns, summary_latency=a.summary_latency)
        print(asyncio.run(run(cfg, _floats(a.reply_latencies), _ints(a.scale_turns),
                              a.questions, a.full_history)))
    print(f"load average at end: {_load()}")


if __name__ == "__main__":
    main()
