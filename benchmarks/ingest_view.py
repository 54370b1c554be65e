"""Scenario 3: ingest and view, reusing ``benchmarks.ingest`` (the memory engine's benchmark).

``benchmarks.ingest.run()`` returns Markdown text only, so this wrapper calls its building
blocks (``measure_gistbot``, ``open_baseline``/``baseline_record``, ``closed_loop``,
``open_loop``, ``open_gistbot``, ``build_channel``, ``view_medians``) in the same way and
keeps the numbers, for the combined table, the targets and the JSON. Sizes follow
``ingest``'s own defaults in a full run and are smaller with ``--quick``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import Config, Section, Target, progress
from memory.models import ChannelKey
from memory.tokens import TokenCounter

__all__ = ["run"]


def _rows(gist: Any, base: Any, view: tuple[float, float]) -> list[dict[str, Any]]:
    """Metric rows, gistbot beside the bare aiosqlite baseline."""
    (gc, go), (bc, bo) = gist, base

    def row(metric: str, g: float | None, b: float | None) -> dict[str, Any]:
        return {"metric": metric, "gistbot": g, "bare aiosqlite": b}

    return [
        row("closed loop: durable turns/s", gc.rate, bc.rate),
        row("closed loop: record() p99 ms", gc.pct(99) * 1000, bc.pct(99) * 1000),
        row("open loop (10,000/s offered): achieved turns/s", go.rate, bo.rate),
        row("open loop: record() p50 ms", go.pct(50) * 1000, bo.pct(50) * 1000),
        row("open loop: record() p99 ms", go.pct(99) * 1000, bo.pct(99) * 1000),
        row("view() median µs, 100 turns", view[0] * 1e6, None),
        row("view() median µs, 10,000 turns", view[1] * 1e6, None),
    ]


async def run(cfg: Config) -> Section:
    """Scenario 3: gistbot vs bare aiosqlite on 1,000 channels; view() at 100 vs 10,000."""
    from benchmarks import ingest

    channels, rate = 1_000, 10_000.0
    per_channel, open_total = (10, 5_000) if cfg.quick else (40, 40_000)
    base_per_channel, base_open = (2, 1_000) if cfg.quick else (5, 5_000)
    rounds = 200 if cfg.quick else 2_000
    progress(f"scenario 3: record() on {channels:,} channels ({per_channel} turns each, then "
             f"{open_total:,} at {rate:,.0f}/s offered) vs bare aiosqlite; view() 100 vs 10,000")
    tok = TokenCounter("gpt-4o")
    keys = [ChannelKey("discord", "bench", f"c{i}") for i in range(channels)]
    with tempfile.TemporaryDirectory(prefix="gistbot-ingest-") as tmp:
        db = Path(tmp)
        on = await ingest.measure_gistbot(db / "gistbot.db", tok, None, keys, per_channel,
                                          rate, open_total)
        progress(f"  scenario 3: gistbot {on.closed.rate:,.0f} turns/s")
        conn = await ingest.open_baseline(db / "baseline.db")
        b_closed = await ingest.closed_loop(ingest.baseline_record(conn), keys,
                                            base_per_channel)
        b_open = await ingest.open_loop(ingest.baseline_record(conn), keys, rate, base_open,
                                        base_per_channel)
        await conn.close()
        progress(f"  scenario 3: bare aiosqlite {b_closed.rate:,.0f} turns/s")
        small, big = ChannelKey("d", "v", "small"), ChannelKey("d", "v", "big")
        store, mgr = await ingest.open_gistbot(db / "view.db", tok)
        await ingest.build_channel(mgr, small, 100, idle=True)
        await ingest.build_channel(mgr, big, 10_000, idle=True)
        v_small, v_big = await ingest.view_medians(mgr, (small, big), rounds)
        await mgr.close()
        await store.close()
    rows = _rows((on.closed, on.opened), (b_closed, b_open), (v_small, v_big))
    view_ratio = v_big / v_small
    targets = [
        Target("turns/s", "≥ 10,000 durable turns/s (record(), 1,000 channels)",
               f"{on.closed.rate:,.0f} turns/s ({on.closed.rate / b_closed.rate:.1f}x bare "
               "aiosqlite)", round(on.closed.rate / 10_000, 2), on.closed.rate >= 10_000),
        Target("view", "view() at 10,000 turns within 1.2x of 100 turns",
               f"{view_ratio:.2f}x ({v_small * 1e6:.0f} → {v_big * 1e6:.0f} µs)",
               round(view_ratio / 1.2, 3), view_ratio <= 1.2),
    ]
    notes = [
        "From benchmarks/ingest.py (its building blocks; `python -m benchmarks.ingest` "
        "prints its fuller report). WAL, synchronous=FULL: every acknowledged turn is "
        "committed. Closed loop: one producer per channel, back to back (capacity). Open "
        f"loop: {rate:,.0f} turns/s offered (latency at that load).",
        f"gistbot compaction on (instant fake summary model): {on.compactions:,} summaries "
        "committed during the run. view(): channels kept compacted (the normal state), "
        "budget 4,000 tokens.",
    ]
    return Section("3", "Ingest and view", rows, targets, notes)
