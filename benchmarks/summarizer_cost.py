"""Scenario 1's gistbot phase alone: what its summarizer costs, quickly.

``python -m benchmarks.summarizer_cost [--turns N] [--summary-latency S ...]``

The same replay, memory, budget and counting as ``python -m benchmarks --scenarios 1``
(``benchmarks.prompt_cost``: the shipped conversation, a reply every 5th message,
``CONTEXT_TOKENS`` 4096 / ``REPLY_TOKENS`` 512 / ``SUMMARY_TOKENS`` 600, the one loopback fake
server, tokens counted on the wire with o200k_base), for gistbot only: the full scenario
spends most of its ~22 minutes in LangChain's phase. One run per summary latency given
(default 0.5 s and 2 s, issue 32's "at any summary latency"). For each: summarizer calls
(identifier retries included, and how many were retries), summarizer tokens (prompt +
completion of every summarizer call), total tokens, the summarizer's share, compactions
committed and failed, prompts over budget; then scenario 5's gistbot row from the same
run (``benchmarks.retention``: the 36 planted identifiers remembered, and in the probe's
prompt asked in a row and one at a time on a fresh copy; the probes come after the
summarizer's calls are counted, as in the full run). Issue 32's targets: ≤ 100
summarizer calls, summarizer tokens ≤ 15% of all tokens. Not a test: the published table
comes from the full run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import Config, machine_info
from benchmarks.conversation import load_conversation, load_probes
from benchmarks.gistbot_memory import GistbotMemory
from benchmarks.prompt_cost import _one, prompt_tokens, summarize_calls
from benchmarks.responder import Call, fake_server
from benchmarks.retention import _row as retention_row
from memory.tokens import TokenCounter, ensure_offline_encodings

__all__ = ["is_retry", "main", "measure"]

MAX_CALLS = 100
MAX_SHARE = 0.15


def is_retry(call: Call) -> bool:
    """Whether a summarizer call was an identifier retry (it asks for missing identifiers)."""
    return any("<<<MISSING IDENTIFIERS>>>" in str(m.get("content", ""))
               for m in call.body.get("messages", []))


async def measure(cfg: Config, pace: str | float = "idle") -> dict[str, Any]:
    """Replay scenario 1 for gistbot alone; its table row plus the summarizer's breakdown.
    ``pace``: as scenario 1, each message once compaction is idle, or a fixed gap in
    seconds whatever compaction is doing (``GistbotMemory``)."""
    rows = load_conversation(cfg.turns)
    probes = load_probes(cfg.turns)
    tok = TokenCounter("gpt-4o")
    async with fake_server(cfg) as (fake, responder), GistbotMemory.open(
            cfg, base_url=fake.base_url, pace=pace) as mem:
        run = await _one(mem, rows, cfg, responder, probes)
    row = summarize_calls(run, cfg, tok)
    summaries = [c for c in run.calls if c.kind == "summary"]
    retries = [c for c in summaries if is_retry(c)]
    row |= {
        "retries": len(retries),
        "retry tokens": sum(prompt_tokens(c.body, tok) + tok.count(c.answer) for c in retries),
        "summary prompt tokens": sum(prompt_tokens(c.body, tok) for c in summaries),
        "share": row["summarizer tokens"] / max(row["total tokens"], 1),
        "compactions": run.breakdown.get("compactions"),
        "compaction failures": run.breakdown.get("compaction_failures"),
        "carried facts": run.breakdown.get("facts_stored"),
    }
    kept = retention_row(run, probes)
    row |= {
        "planted": len(probes),
        "remembered": kept["remembered"],
        "in probe prompt": kept["in the probe's prompt"],
        "one at a time": kept["in the probe's prompt, one at a time"],
    }
    return row


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: print the machine, then one line per summary latency."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.summarizer_cost",
                                description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=2000, help="turns of the conversation")
    p.add_argument("--reply-latency", type=float, default=0.1, help="fake reply latency, s")
    p.add_argument("--summary-latency", type=float, nargs="+", default=[0.5, 2.0],
                   help="fake summary latencies, s (one run each)")
    p.add_argument("--pace", type=float, default=None,
                   help="seconds between messages instead of scenario 1's idle pace")
    a = p.parse_args(argv)
    ensure_offline_encodings()
    m = machine_info()
    print(f"machine: {m['cores']} cores, {m['cpu']}, Python {m['python']}; {m['date']}; "
          f"gistbot {m['commit']}; {a.turns} turns; pace "
          f"{'idle' if a.pace is None else f'{a.pace} s'}")
    cols = ("summary latency s", "summarizer calls", "retries", "summarizer tokens",
            "retry tokens", "total tokens", "share", "compactions", "compaction failures",
            "carried facts",
            "prompts over budget", "max prompt tokens", "remembered", "in probe prompt",
            "one at a time")
    print("| " + " | ".join(cols) + " |\n|" + "---:|" * len(cols), flush=True)
    for latency in a.summary_latency:
        with tempfile.TemporaryDirectory(prefix="gistbot-summ-") as tmp:
            cfg = Config(out=Path(tmp), turns=a.turns, reply_latency=a.reply_latency,
                         summary_latency=latency)
            pace: str | float = "idle" if a.pace is None else a.pace
            row = asyncio.run(measure(cfg, pace)) | {"summary latency s": latency}
        met = row["summarizer calls"] <= MAX_CALLS and row["share"] <= MAX_SHARE
        cells = [f"{row[c]:.1%}" if c == "share" else f"{row[c]:,}" if isinstance(row[c], int)
                 else str(row[c]) for c in cols]
        print("| " + " | ".join(cells) + f" |  {'met' if met else 'MISSED'}", flush=True)


if __name__ == "__main__":
    main()
