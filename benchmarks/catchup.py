"""``/catchup`` latency on long periods, against a fake model that answers in 100 ms.

``python -m benchmarks.catchup [--quick] [--sizes 1000,20000] [--reps N]``

One SQLite channel holds ``size`` messages of a seeded multi-speaker conversation (ids,
URLs, questions, chit-chat; one message a minute or so), of which the oldest 90% are
folded into archived episodes of 100 turns each, as compaction would have left them.
Each run makes the catch-up of the whole span through gistbot's real path (store read,
numbering, map-reduce through ``OpenAILLM`` and its gate with ``LLM_CONCURRENCY=4``,
citation checks, links) against the loopback OpenAI-compatible fake whose every answer
takes 100 ms and cites numbers of its prompt. Reported: p50/p95 wall time, model calls,
the largest prompt (must be ≤ ``CONTEXT_TOKENS − REPLY_TOKENS``).

Baselines on the same data and fake:

* **naive sequential map**: every message, in consecutive chunks that fit the budget,
  one call after another, then one reduce call (what a straightforward map-reduce does);
* **one giant prompt**: every message in one call; its size is reported against the
  budget (a real endpoint refuses it past its context), its latency against the fake.

Targets (issue 17): 1,000 messages p95 < 3 s; 20,000 messages p95 < 6 s; every prompt
≤ ``CONTEXT_TOKENS``. Writes ``benchmarks/results/catchup.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import tempfile
import time
import zoneinfo
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.discord.catchup import discord_link
from benchmarks.common import machine_info, percentile
from bot.catchup.citations import number_turns
from bot.catchup.gather import Catchup, Period, Scope
from bot.catchup.text import prompt_lines
from bot.conversation.budget import Budget
from bot.errors import LLMError
from bot.llm.client import OpenAILLM
from bot.settings.sections import DEFAULT_SYSTEM_PROMPT, BudgetSettings
from memory.completion import ChatMessage
from memory.models import ChannelKey, NewEpisode, NewTurn, Turn
from memory.stores.sqlite.store import SqliteStore
from memory.tokens import TokenCounter
from tests.fakes.openai_server import FakeOpenAI

KEY = ChannelKey("discord", "1", "2")
CONTEXT, REPLY = 8000, 800
LATENCY = 0.1
START = 1_780_000_000.0
_LINE = re.compile(r"^\[(\d+)\] ")
_POINT = re.compile(r"^- (.*\[[\d, ]+\])$")
NAMES = ["Alice", "Bob", "Carol", "Dmitri", "Eun-ji", "Farah", "Gustavo"]
TOPICS = ["the release", "the outage", "the migration", "billing", "onboarding", "the API"]


def responder(body: dict[str, Any]) -> str:
    """Bullets citing the first numbers of the prompt, or the first points of a reduce."""
    user = str(body["messages"][-1]["content"])
    out = []
    for line in user.splitlines():
        if m := _LINE.match(line):
            out.append(f"- {' '.join(line.split()[3:12])} [{m.group(1)}]")
        elif m := _POINT.match(line):
            out.append(f"- {m.group(1)}")
        if len(out) == 8:
            break
    return "\n".join(out) or "Nothing."


def message(rng: random.Random, i: int) -> tuple[str, str]:
    who = rng.choice(NAMES)
    topic = rng.choice(TOPICS)
    kind = rng.random()
    if kind < 0.15:
        text = f"ticket OPS-{1000 + i} tracks {topic}, see https://tracker.example.com/{i}"
    elif kind < 0.3:
        text = f"what is the status of {topic}? anyone looked at order ORD-{50000 + i}?"
    elif kind < 0.45:
        text = "thanks!" if rng.random() < 0.5 else "ok sounds good"
    else:
        words = " ".join(rng.choice(["we", "should", "move", "the", "deadline", "review",
                                     "tomorrow", "numbers", "look", "fine", "after", "fix"])
                         for _ in range(rng.randint(8, 30)))
        text = f"about {topic}: {words}"
    return who, text


async def build(path: Path, size: int, tok: TokenCounter) -> None:
    rng = random.Random(size)
    async with SqliteStore(path, synchronous="OFF") as store:
        for i in range(size):
            who, text = message(rng, i)
            await store.record(NewTurn(KEY, str(10**17 + i), "user", who.lower(), who, text,
                                       tok.count(text), START + i * 50.0))
        folded = size * 9 // 10
        version = 0
        for first in range(1, folded, 100):
            last = min(first + 99, folded)
            ep = NewEpisode(first, last, START + (first - 1) * 50, START + (last - 1) * 50,
                            tuple(NAMES[:3]), f"Turns {first}-{last}: the team discussed "
                            f"{TOPICS[first % len(TOPICS)]} and tickets OPS-{1000 + first}.")
            assert await store.commit_summary(KEY, expected_version=version, text="summary",
                                              folded_through=last, facts=(), now=time.time(),
                                              episode=ep)
            version += 1


async def naive(store: SqliteStore, llm: OpenAILLM, tok: TokenCounter, end: float) -> float:
    """Every message in budget-sized chunks, sequentially, then one reduce call."""
    t0 = time.perf_counter()
    items = number_turns([t for t in await store.turns_between(KEY, START, end)])
    lines = prompt_lines(items, zoneinfo.ZoneInfo("UTC"))
    room = int((CONTEXT - REPLY) * 0.9) - 300
    points: list[str] = []
    chunk: list[str] = []
    used = 0
    for line in [*lines, None]:
        cost = tok.count(line) if line is not None else 0
        if line is None or (chunk and used + cost > room):
            msgs: list[ChatMessage] = [{"role": "system", "content": "catch-up"},
                                       {"role": "user", "content": "\n".join(chunk)}]
            points.append((await llm.complete(msgs, max_tokens=REPLY, purpose="digest")).text)
            chunk, used = [], 0
        if line is not None:
            chunk.append(line)
            used += cost
    reduce = "\n".join(points)[: room * 3]
    await llm.complete([{"role": "user", "content": reduce}], max_tokens=REPLY,
                       purpose="digest")
    return time.perf_counter() - t0


async def giant(store: SqliteStore, llm: OpenAILLM, tok: TokenCounter,
                end: float) -> tuple[float | None, int]:
    t0 = time.perf_counter()
    items = number_turns(await store.turns_between(KEY, START, end))
    text = "\n".join(prompt_lines(items, zoneinfo.ZoneInfo("UTC")))
    tokens = tok.count(text)
    try:
        await llm.complete([{"role": "user", "content": text}], max_tokens=REPLY,
                           purpose="digest")
    except LLMError:  # the fake, like real servers, refuses a body this large
        return None, tokens
    return time.perf_counter() - t0, tokens


async def links(turns: Sequence[Turn]) -> dict[Turn, str]:
    return {t: discord_link(t) for t in turns}


async def measure(size: int, reps: int, tmp: Path, fake: FakeOpenAI,
                  tok: TokenCounter) -> dict[str, Any]:
    path = tmp / f"catchup-{size}.db"
    t0 = time.perf_counter()
    await build(path, size, tok)
    built = time.perf_counter() - t0
    end = START + size * 50.0
    llm = OpenAILLM(api_key=None, base_url=fake.base_url, model="gpt-test", timeout=30,
                    max_retries=0, concurrency=4)
    async with SqliteStore(path) as store:
        budget = Budget.compute(BudgetSettings(context_tokens=CONTEXT, reply_tokens=REPLY),
                                DEFAULT_SYSTEM_PROMPT, tok)
        engine = Catchup(store, llm, tok, None, budget, parallel=8)
        times, calls, prompt = [], 0, 0
        for _ in range(reps):
            t = time.perf_counter()
            result = await engine.run(Scope(KEY), Period(START, end, "all"), links)
            times.append(time.perf_counter() - t)
            calls, prompt = result.calls, max(prompt, result.max_prompt_tokens)
            assert result.bullets, "no points"
        naive_times = [await naive(store, llm, tok, end) for _ in range(max(1, reps // 5))]
        giant_time, giant_tokens = await giant(store, llm, tok, end)
    await llm.aclose()
    return {
        "messages": size, "build_s": round(built, 1), "reps": reps,
        "p50_s": round(percentile(times, 50), 3), "p95_s": round(percentile(times, 95), 3),
        "calls": calls, "max_prompt": prompt, "budget": CONTEXT - REPLY,
        "naive_p95_s": round(percentile(naive_times, 95), 3),
        "ratio": round(percentile(times, 95) / percentile(naive_times, 95), 3),
        "giant_tokens": giant_tokens,
        "giant_s": "refused (HTTP 413)" if giant_time is None else f"{giant_time:.3f} s",
    }


async def main(sizes: Sequence[int], reps: int, out: Path) -> list[dict[str, Any]]:
    tok = TokenCounter("gpt-4o")
    rows = []
    fake = FakeOpenAI(responder=responder, latency=lambda body: LATENCY, strict=False)
    async with fake:
        with tempfile.TemporaryDirectory() as tmp:
            for size in sizes:
                rows.append(await measure(size, reps, Path(tmp), fake, tok))
                fake.requests.clear()
                print(rows[-1], flush=True)
    info = machine_info()
    lines = [
        "# /catchup latency (fake model, 100 ms per answer, LLM_CONCURRENCY=4)", "",
        f"Machine: {info.get('cpu', '?')}, {info.get('cores', '?')} cores, "
        f"Python {info.get('python', '?')}; commit {info.get('commit', '?')}.", "",
        "| messages | p50 | p95 | target p95 | calls | largest prompt / budget | naive "
        "sequential map p95 | gistbot ÷ naive | one giant prompt |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        target = "< 3 s" if r["messages"] <= 1000 else "< 6 s"
        lines.append(
            f"| {r['messages']:,} | {r['p50_s']} s | {r['p95_s']} s | {target} | {r['calls']} | "
            f"{r['max_prompt']:,} / {r['budget']:,} | {r['naive_p95_s']} s | {r['ratio']}x | "
            f"{r['giant_tokens']:,} tokens ({r['giant_tokens'] / r['budget']:.1f}x the budget)"
            f", {r['giant_s']} |")
    await asyncio.to_thread(out.write_text, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1,000 and 5,000 messages, 3 runs")
    p.add_argument("--sizes", default="1000,20000")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", type=Path,
                   default=Path(__file__).parent / "results" / "catchup.md")
    a = p.parse_args()
    sizes = [1000, 5000] if a.quick else [int(s) for s in a.sizes.split(",")]
    asyncio.run(main(sizes, 3 if a.quick else a.reps, a.out))
