"""Scenario 2: reply latency with summarization off versus on (slow summaries).

The same stretch of the conversation goes through gistbot twice at a fixed channel pace
(``latency_gap`` between messages, so summaries overlap many replies): once with
compaction effectively off (``MAX_HISTORY_MESSAGES`` out of reach) and once with the
defaults, where each summary takes ``summary_latency`` (2 s by default) in the background.
Replies must not carry the summary time: p95 "on" within 1.1x of p95 "off".
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import Config, Section, Target, percentile, progress, save_plot
from benchmarks.conversation import addressed, load_conversation
from benchmarks.gistbot_memory import KEY, GistbotMemory
from benchmarks.prompt_cost import prompt_tokens
from benchmarks.responder import Responder
from memory.tokens import TokenCounter

__all__ = ["measure", "run"]

OFF, ON, INSTANT = "summarization off", "summarization on", "summarization on, instant summaries"
MODES: dict[str, dict[str, str]] = {OFF: {"MAX_HISTORY_MESSAGES": "100000000"}, ON: {},
                                    INSTANT: {}}
_TAGS = {OFF: "off", ON: "on", INSTANT: "instant"}


async def measure(cfg: Config, base_url: str, responder: Responder, mode: str
                  ) -> dict[str, Any]:
    """One pass: reply latencies, how many overlapped a running compaction, summary calls."""
    rows = load_conversation(cfg.latency_turns)
    model = "gpt-4o-bench-latency-" + _TAGS[mode]
    if mode == INSTANT:
        responder.summary_latency_by_model[model] = 0.0
    samples: list[float] = []
    overlapped = 0
    async with GistbotMemory.open(cfg, base_url=base_url, model=model, name=mode,
                                  pace=cfg.latency_gap, extra=MODES[mode]) as mem:
        for row in rows:
            await mem.ready()
            if addressed(row, cfg.reply_every):
                overlapped += mem.rt.memory.busy(KEY)
                started = time.perf_counter()
                await mem.reply(row)
                samples.append(time.perf_counter() - started)
            else:
                await mem.observe(row)
        failures = mem.failures
        await mem.settle()
    calls = responder.take(model)
    tok = TokenCounter("gpt-4o")
    prompts = [prompt_tokens(c.body, tok) for c in calls if c.kind == "reply"]
    return {
        "mode": mode,
        "replies": len(samples),
        "replies while a summary ran": overlapped,
        "summarizer calls": sum(c.kind == "summary" for c in calls),
        "max prompt tokens": max(prompts, default=0),
        "prompts over budget": sum(p > cfg.prompt_budget for p in prompts),
        "reply p50 ms": percentile(samples, 50) * 1000,
        "reply p95 ms": percentile(samples, 95) * 1000,
        "reply max ms": max(samples, default=0.0) * 1000,
        "failed replies": failures,
        "_samples": samples,
    }


async def run(cfg: Config, base_url: str, responder: Responder) -> Section:
    """Scenario 2: both passes, the ratio of their p95, a plot of every reply."""
    progress(f"scenario 2: {cfg.latency_turns} turns at {cfg.latency_gap * 1000:.0f} ms "
             f"apart, replies {cfg.reply_latency * 1000:.0f} ms, summaries "
             f"{cfg.summary_latency * 1000:.0f} ms")
    rows = []
    for mode in MODES:
        rows.append(await measure(cfg, base_url, responder, mode))
        progress(f"  scenario 2: {mode}: p95 {rows[-1]['reply p95 ms']:.1f} ms")
    samples = {r["mode"]: r.pop("_samples") for r in rows}
    off, on, instant = rows
    ratio = on["reply p95 ms"] / max(off["reply p95 ms"], 1e-9)
    same_prompts = on["reply p95 ms"] / max(instant["reply p95 ms"], 1e-9)
    plot = save_plot(
        cfg.out / "reply_latency.png", "gistbot reply latency, summarization off vs on",
        "reply number", "latency (ms)",
        {m: (list(range(1, len(s) + 1)), [x * 1000 for x in s]) for m, s in samples.items()},
        hline=(cfg.summary_latency * 1000, "one summary call"),
    )
    targets = [Target("p95 on/off", "reply p95 with slow summaries ≤ 1.1x p95 without",
                      f"{ratio:.2f}x ({on['reply p95 ms']:.0f} ms vs {off['reply p95 ms']:.0f} ms)",
                      round(ratio / 1.1, 3), ratio <= 1.1)]
    notes = [
        f"{on['replies while a summary ran']} of {on['replies']} replies started while a "
        f"{cfg.summary_latency:.1f} s summary call was in flight for the same channel.",
        f"No reply waited for a summary: the slowest took {on['reply max ms']:.0f} ms. "
        "Prompt size moves latency a little (the fake answers after a fixed delay, but "
        "building a bigger request costs client CPU): with summarization off the view fills "
        "the budget; with slow summaries compaction lags, so views hold more turns than with "
        f"instant ones (p95 slow / p95 instant = {same_prompts:.2f}x).",
        "Latency is measured around a mention's path (ChatService.receive, the reply flow: "
        "record, view, model call, record the reply). LangChain's buffer summarizes inside "
        "the reply: see scenario 1.",
        f"Plot: {plot.name}.",
    ]
    return Section("2", "Reply latency under slow summaries", rows, targets, notes,
                   {"samples_s": samples})
