"""Reply latency of gistbot against the plain memories that share its client, quickly.

``python -m benchmarks.reply_overhead [--turns N] [--reply-latency S] [--summary-latency S]``

Scenario 1's conversation and replies (a reply every 5th message) for gistbot, the last-25
window and the full history, each alone and one after another, against the one loopback
fake server and through the same ``bot.llm.client.OpenAILLM``. Summaries take 50 ms by default:
gistbot waits for idle compaction before each message (``pace="idle"``), so how long a
summary takes moves no reply, and the run takes about 2 minutes instead of the 22 of
``python -m benchmarks --scenarios 1``, whose LangChain phase is the long one. For trying a
change to the reply path; the published numbers come from the full run.

Prints p50/p95 per memory, gistbot's view (``MemoryManager.view``: snapshot, searches,
composing) p50/p95, and issue 13's ratio: gistbot's reply p95 over the last-25 window's
(target ≤ 1.1x). Not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.__main__ import fake_server
from benchmarks.common import Config, machine_info, percentile
from benchmarks.conversation import load_conversation
from benchmarks.gistbot_memory import GistbotMemory
from benchmarks.prompt_cost import drive, open_memories
from memory.tokens import ensure_offline_encodings

__all__ = ["main", "run"]

MEMORIES = ("gistbot", "last-25 window", "full history")


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


async def run(cfg: Config) -> str:
    """Replay for each memory; return the table."""
    rows = load_conversation(cfg.turns)
    views: list[float] = []
    lines = ["| memory | replies | reply p50 ms | reply p95 ms |", "|---|---:|---:|---:|"]
    p95: dict[str, float] = {}
    async with fake_server(cfg) as (fake, _), open_memories(cfg, fake.base_url,
                                                             which=MEMORIES) as mems:
        for mem in mems:
            if isinstance(mem, GistbotMemory):
                _timed_views(mem, views)
            samples = [s for _, s in await drive(mem, rows, cfg.reply_every)]
            p95[mem.name] = percentile(samples, 95) * 1000
            lines.append(f"| {mem.name} | {len(samples)} | {percentile(samples, 50) * 1000:.1f} "
                         f"| {p95[mem.name]:.1f} |")
    ratio = p95["gistbot"] / max(p95["last-25 window"], 1e-9)
    lines += [
        "",
        f"gistbot's view: p50 {percentile(views, 50) * 1000:.2f} ms, "
        f"p95 {percentile(views, 95) * 1000:.2f} ms ({len(views)} views)",
        f"reply p95, gistbot / last-25 window: {ratio:.3f}x (issue 13: ≤ 1.1x, "
        f"{'met' if ratio <= 1.1 else 'missed'})",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: print the machine, the settings and the table."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.reply_overhead",
                                description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=2000, help="turns of the conversation")
    p.add_argument("--reply-latency", type=float, default=0.1, help="fake reply latency, s")
    p.add_argument("--summary-latency", type=float, default=0.05,
                   help="fake summary latency, s")
    a = p.parse_args(argv)
    ensure_offline_encodings()
    m = machine_info()
    print(f"machine: {m['cores']} cores, {m['cpu']}, Python {m['python']}; {m['date']}; "
          f"gistbot {m['commit']}")
    print(f"{a.turns} turns; fake replies {a.reply_latency * 1000:.0f} ms, summaries "
          f"{a.summary_latency * 1000:.0f} ms\n")
    with tempfile.TemporaryDirectory(prefix="gistbot-overhead-") as tmp:
        cfg = Config(out=Path(tmp), turns=a.turns, reply_latency=a.reply_latency,
                     summary_latency=a.summary_latency)
        print(asyncio.run(run(cfg)))


if __name__ == "__main__":
    main()
