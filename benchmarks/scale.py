"""Scenario 4: many channels in one process: resident memory, record throughput, loop lag.

Each size runs in a fresh worker process (``python -m benchmarks.scale --worker ...``), so
its resident set size (psutil RSS) is gistbot's alone: a real ``Runtime`` (SQLite with
``synchronous=FULL``, ``MemoryManager``, ``ChatService``, ``OpenAILLM``) talking to the
parent's fake server. The worker

1. records ``turns_per_channel`` messages in every one of ``channels`` channels through
   ``ChatService.receive`` (1,024 in flight, as a busy gateway delivers them): record
   throughput;
2. measures RSS;
3. delivers a burst of ``burst`` messages to random channels as fast as the loop takes
   them (one task per message, yielding after each, as a gateway dispatches events; one in
   ten mentions the bot, so replies and background compactions run too) while a 5 ms
   ticker measures how late the event loop wakes it up: event-loop lag max and p99.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Config, Section, Target, percentile, progress, save_plot
from benchmarks.delivered import answer

__all__ = ["run", "worker"]

TICK = 0.005


async def _lag_monitor(stop: asyncio.Event, lags: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        await asyncio.sleep(TICK)
        lags.append(max(loop.time() - started - TICK, 0.0))


async def worker(channels: int, per_channel: int, burst: int, base_url: str,
                 summary_tokens: int) -> dict[str, Any]:
    """One size, in this process; returns the measurements."""
    import psutil

    from benchmarks.common import Config as _Config
    from benchmarks.gistbot_memory import gistbot_env
    from bot.app import Runtime
    from bot.messages import IncomingMessage
    from bot.settings import load_settings
    from memory.models import ChannelKey

    proc = psutil.Process()
    cfg = _Config(out=Path("."), summary_tokens=summary_tokens)
    with tempfile.TemporaryDirectory(prefix="gistbot-scale-") as tmp:
        env = gistbot_env(cfg, base_url=base_url, model="gpt-4o-bench-scale",
                          db=Path(tmp) / "scale.db")
        async with Runtime.open(load_settings(environ=env, env_file=None)) as rt:
            rss_start = proc.memory_info().rss
            keys = [ChannelKey("bench", "scale", f"c{c}") for c in range(channels)]

            def msg(key: ChannelKey, mid: str, mention: bool, n: int) -> IncomingMessage:
                who = f"U{n % 500}"  # 500 people talking
                return IncomingMessage(key, mid, who, who, f"status update {mid}: all "
                                       "green on checkout, deploy at 15:00", time.time(),
                                       mentions_bot=mention)

            todo = [msg(k, f"p{t}", False, c) for t in range(per_channel)
                    for c, k in enumerate(keys)]
            started = time.perf_counter()
            for i in range(0, len(todo), 1024):
                await asyncio.gather(*(answer(rt, m) for m in todo[i:i + 1024]))
            populate_s = time.perf_counter() - started
            gc.collect()
            rss_populated = proc.memory_info().rss
            print(f"    {channels:,} channels: recorded {len(todo):,} turns in {populate_s:.1f} s",
                  file=sys.stderr, flush=True)

            rng = random.Random(7)
            burst_msgs = [msg(keys[rng.randrange(channels)], f"b{j}", j % 10 == 0, j)
                          for j in range(burst)]
            lags: list[float] = []
            stop = asyncio.Event()
            ticker = asyncio.create_task(_lag_monitor(stop, lags))
            await asyncio.sleep(TICK * 4)
            started = time.perf_counter()
            tasks = []
            for m in burst_msgs:  # as a gateway dispatches: one task per event, then yield
                tasks.append(asyncio.create_task(answer(rt, m)))
                await asyncio.sleep(0)
            replies = await asyncio.gather(*tasks)
            burst_s = time.perf_counter() - started
            stop.set()
            await ticker
            failed = sum(1 for r in replies if r is not None and r.failed)
            await rt.memory.wait_idle()
            rss_end = proc.memory_info().rss
            compactions = rt.memory.compactions
    return {
        "channels": channels, "turns recorded": len(todo),
        "record turns/s": len(todo) / populate_s,
        "RSS MB": rss_populated / 2**20, "RSS MB before": rss_start / 2**20,
        "RSS MB after burst": rss_end / 2**20,
        "burst messages": burst, "burst s": burst_s, "burst failed replies": failed,
        "burst compactions": compactions,
        "loop lag max ms": max(lags, default=0.0) * 1000,
        "loop lag p99 ms": percentile(lags, 99) * 1000,
    }


async def _spawn(cfg: Config, channels: int, base_url: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.scale", "--worker", "--channels", str(channels),
        "--per-channel", str(cfg.turns_per_channel), "--burst", str(cfg.burst),
        "--base-url", base_url, "--summary-tokens", str(cfg.summary_tokens),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"scale worker for {channels} channels failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def run(cfg: Config, base_url: str) -> Section:
    """Scenario 4: one worker per size, then targets at the largest size."""
    progress(f"scenario 4: {', '.join(f'{n:,}' for n in cfg.channels)} channels, "
             f"{cfg.turns_per_channel} turns each, then a burst of {cfg.burst:,} messages")
    rows = []
    for n in cfg.channels:
        rows.append(await _spawn(cfg, n, base_url))
        r = rows[-1]
        progress(f"  scenario 4: {n:,} channels: {r['RSS MB']:.0f} MB, "
                 f"{r['record turns/s']:,.0f} turns/s, lag p99 {r['loop lag p99 ms']:.1f} ms")
    big = rows[-1]
    targets = [
        Target("RSS", f"100,000 channels in < 500 MB resident (measured at {big['channels']:,})",
               f"{big['RSS MB']:.0f} MB", round(big["RSS MB"] / 500, 3), big["RSS MB"] < 500),
        Target("loop lag", f"event-loop lag p99 < 50 ms during a {cfg.burst:,}-message burst",
               f"{big['loop lag p99 ms']:.1f} ms (max {big['loop lag max ms']:.0f} ms)",
               round(big["loop lag p99 ms"] / 50, 3), big["loop lag p99 ms"] < 50),
    ]
    plot = save_plot(cfg.out / "scale_rss.png", "Resident memory by channel count",
                     "channels", "RSS (MB)",
                     {"after recording": ([r["channels"] for r in rows],
                                          [r["RSS MB"] for r in rows]),
                      "after the burst": ([r["channels"] for r in rows],
                                          [r["RSS MB after burst"] for r in rows])})
    notes = [
        "RSS after recording every channel, in a fresh process (Python, SQLite caches, "
        "gistbot's per-channel state); 'before' is the same process right after start.",
        "Throughput counts messages handed to ChatService.receive that stored a turn durably "
        "(SQLite WAL, synchronous=FULL, group commit), 1,024 in flight.",
        "Burst: one task per message, created back to back; one in ten mentions the bot "
        f"(fake reply {cfg.reply_latency * 1000:.0f} ms, summaries "
        f"{cfg.summary_latency * 1000:.0f} ms).",
        f"Plot: {plot.name}.",
    ]
    return Section("4", "Scale: channels, memory, throughput, event-loop lag", rows, targets,
                   notes)


def main() -> None:
    """Worker entry point: print one JSON line."""
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true", required=True)
    p.add_argument("--channels", type=int, required=True)
    p.add_argument("--per-channel", type=int, default=2)
    p.add_argument("--burst", type=int, default=10_000)
    p.add_argument("--base-url", required=True)
    p.add_argument("--summary-tokens", type=int, default=600)
    a = p.parse_args()
    from memory.tokens import ensure_offline_encodings

    ensure_offline_encodings()
    result = asyncio.run(worker(a.channels, a.per_channel, a.burst, a.base_url,
                                a.summary_tokens))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
