"""``python -m benchmarks [--quick] [--out DIR | --update-results] [--endpoint URL --model NAME]``.

Runs the scenarios of issue 7 against one loopback fake OpenAI server (replies 100 ms,
summaries 2 s by default; deterministic answers, see ``benchmarks.responder``) and writes
``results.md``, ``results.json`` and PNG plots to a new temporary folder (or ``--out DIR``;
the committed ``benchmarks/results/`` only with ``--update-results``, so a trial run never
overwrites the published numbers):

1. prompt size and cost (``prompt_cost``)    2. reply latency under slow summaries (``latency``)
3. ingest and view (``ingest``, reused)      4. scale: channels, RSS, event-loop lag (``scale``)
5. fact retention (``retention``, ``grouped``)  6. long-conversation recall (``longmem``)
7. recall on dialogue as hard as real conversation (``dialogue``)

Scenarios 6 and 7 run only when asked (``--scenarios 6,7``; with ``--quick`` a few
conversations and questions); ``python -m benchmarks.longmem`` and ``python -m
benchmarks.dialogue`` run them alone, also at other budgets.

With ``--endpoint URL --model NAME`` only scenario 5 runs, against that real model (key from
``OPENAI_API_KEY``), and asks one probe question per planted fact.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Config,
    Section,
    Target,
    commit,
    machine_info,
    progress,
    write_results,
)
from benchmarks.responder import fake_server
from memory.tokens import ensure_offline_encodings

DEFAULT_OUT = Path(__file__).parent / "results"


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """The run's ``Config`` from the command line."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, short latencies (CI)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="output folder (default: a new temporary one)")
    where.add_argument("--update-results", action="store_true",
                       help=f"write to the committed {DEFAULT_OUT.parent.name}/results/")
    p.add_argument("--endpoint", help="a real OpenAI-compatible base URL (scenario 5 only)")
    p.add_argument("--model", help="the real model's name (with --endpoint)")
    p.add_argument("--scenarios", default="1,2,3,4,5",
                   help="comma-separated, e.g. 1,5; 6 (long-conversation recall) and 7 "
                   "(dialogue recall) when listed")
    p.add_argument("--reply-latency", type=float, help="fake reply latency, seconds")
    p.add_argument("--summary-latency", type=float, help="fake summary latency, seconds")
    p.add_argument("--turns", type=int, help="turns of the shipped conversation to replay")
    a = p.parse_args(argv)
    if a.update_results:
        a.out = DEFAULT_OUT
    elif a.out is None:
        a.out = Path(tempfile.mkdtemp(prefix="gistbot-benchmarks-"))
    if bool(a.endpoint) != bool(a.model):
        p.error("--endpoint and --model go together")
    overrides: dict[str, object] = {
        k: v for k, v in (("reply_latency", a.reply_latency), ("summary_latency",
                          a.summary_latency), ("turns", a.turns)) if v is not None
    }
    scenarios = tuple(sorted({int(s) for s in a.scenarios.split(",") if s.strip()}))
    if a.endpoint:
        overrides |= {"endpoint": a.endpoint, "model": a.model}
        scenarios = (5,)
    overrides["scenarios"] = scenarios
    if a.quick:
        return Config.quick_config(a.out, **overrides)
    return Config(out=a.out, **overrides)  # type: ignore[arg-type]


async def run_all(cfg: Config) -> list[Section]:
    """Run the selected scenarios in order; return their sections."""
    from benchmarks import prompt_cost, retention

    sections: list[Section] = []
    if cfg.endpoint:
        sections.append(await retention.run_real(cfg))
        return sections
    async with fake_server(cfg) as (fake, responder):
        runs = None
        grouped_part: tuple[dict[str, Any], list[Target], list[str]] | None = None
        if 1 in cfg.scenarios or 5 in cfg.scenarios:
            s1, runs = await prompt_cost.run(cfg, fake.base_url, responder)
            if 1 in cfg.scenarios:
                sections.append(s1)
            fake.requests.clear()
        if 5 in cfg.scenarios:  # issue 32: questions that four identifiers answer together
            from benchmarks import grouped

            grouped_part = await grouped.run(cfg, fake.base_url, responder)
            fake.requests.clear()
        if 2 in cfg.scenarios:
            from benchmarks import latency

            sections.append(await latency.run(cfg, fake.base_url, responder))
            fake.requests.clear()
        if 3 in cfg.scenarios:
            from benchmarks import ingest_view

            sections.append(await ingest_view.run(cfg))
        if 4 in cfg.scenarios:
            from benchmarks import scale

            sections.append(await scale.run(cfg, fake.base_url))
        if 5 in cfg.scenarios and runs is not None:
            s5 = retention.from_runs(cfg, runs)
            if grouped_part is not None:
                row, targets, notes = grouped_part
                s5.rows.append(row)
                s5.targets += targets
                s5.notes += notes
            sections.append(s5)
        if 6 in cfg.scenarios:
            from benchmarks.longmem import scenario as longmem

            sections.append(await longmem.run(cfg.quick))
        if 7 in cfg.scenarios:
            from benchmarks.dialogue import scenario as dialogue

            sections.append(await dialogue.run(cfg.quick))
    return sections


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run, write the results, print the table's path."""
    cfg = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ensure_offline_encodings()
    machine = machine_info()
    progress(f"gistbot benchmarks ({'quick' if cfg.quick else 'full'}): scenarios "
             f"{', '.join(map(str, cfg.scenarios))}; {machine['cores']} cores, {machine['cpu']}")
    started = time.monotonic()
    sections = asyncio.run(run_all(cfg))
    machine["commit_end"] = commit()
    command = "python -m benchmarks " + shlex.join(sys.argv[1:] if argv is None else argv)
    path = write_results(cfg, machine, sections, command.strip(), time.monotonic() - started)
    progress(f"wrote {path}, {path.with_suffix('.json').name} and plots to {cfg.out}")
    print(path.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
