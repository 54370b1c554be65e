"""Shared pieces of the benchmarks: configuration, machine info, statistics, writers.

Every scenario returns a ``Section``: a title, a Markdown table (``rows``), the targets of
issue 7 with the measured value and its ratio, and notes on how it was measured. The
writers turn the sections into ``results.md`` and ``results.json``; the plots are PNGs made
with matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Config", "Section", "Target", "commit", "cpu_model", "fmt", "machine_info",
           "markdown", "percentile", "progress", "save_plot", "write_results"]

_STARTED = time.monotonic()


@dataclass(frozen=True)
class Config:
    """One benchmark run. ``quick`` shrinks sizes and latencies (CI)."""

    out: Path
    quick: bool = False
    reply_latency: float = 0.1
    summary_latency: float = 2.0
    turns: int = 2000  # scenario 1 and 5: how much of the shipped conversation
    reply_every: int = 5
    context_tokens: int = 4096
    reply_tokens: int = 512
    summary_tokens: int = 600
    window_messages: int = 25
    latency_turns: int = 600  # scenario 2
    latency_gap: float = 0.05  # scenario 2: seconds between messages
    channels: tuple[int, ...] = (1_000, 10_000, 100_000)  # scenario 4
    turns_per_channel: int = 2
    burst: int = 10_000
    endpoint: str | None = None
    model: str | None = None
    scenarios: tuple[int, ...] = (1, 2, 3, 4, 5)

    @property
    def prompt_budget(self) -> int:
        """Tokens a reply prompt may hold: the context minus the reply's reservation."""
        return self.context_tokens - self.reply_tokens

    @classmethod
    def quick_config(cls, out: Path, **overrides: Any) -> Config:
        """Small sizes and short latencies: the whole run in well under a minute."""
        base: dict[str, Any] = dict(out=out, quick=True, reply_latency=0.02,
                                    summary_latency=0.2, turns=250, latency_turns=150,
                                    latency_gap=0.01, channels=(200, 1_000, 5_000),
                                    burst=2_000)
        return cls(**(base | overrides))


@dataclass
class Target:
    """A target of issue 7 next to what was measured; ``ratio`` is measured / limit."""

    name: str
    target: str
    measured: str
    ratio: float | None
    met: bool | None


@dataclass
class Section:
    """One scenario's results."""

    key: str
    title: str
    rows: list[dict[str, Any]]
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # JSON only (series, raw samples)


def progress(message: str) -> None:
    """Print one progress line with the time since start."""
    print(f"[{time.monotonic() - _STARTED:7.1f}s] {message}", flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear between closest ranks; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def fmt(value: Any) -> str:
    """A table cell: thousands separators for ints, 3 significant-ish digits for floats."""
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "–"}[value]
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo, else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass  # fall back to what platform knows
    return platform.processor() or platform.machine()


def commit() -> str:
    """The last commit that changed gistbot's code (memory/, bot/), ``+dirty`` when they
    have uncommitted changes."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "log", "-1", "--format=%h", "--", "memory", "bot"],
                              cwd=root, text=True, capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "memory", "bot"],
                               cwd=root, text=True, capture_output=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty.strip() else "")


def machine_info() -> dict[str, Any]:
    """Cores, CPU model, memory, OS and Python of this machine, and the commit measured."""
    import psutil

    return {
        "commit": commit(),
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of dicts sharing their keys (the first row's keys are the columns)."""
    if not rows:
        return "_(no rows)_"
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def _target_rows(sections: Sequence[Section]) -> list[dict[str, Any]]:
    return [
        {"scenario": s.key, "target": t.target, "measured": t.measured,
         "ratio (measured / target)": t.ratio, "met": t.met}
        for s in sections for t in s.targets
    ]


def write_results(cfg: Config, machine: dict[str, Any], sections: Sequence[Section],
                  command: str, elapsed: float) -> Path:
    """Write ``results.md`` and ``results.json`` to ``cfg.out``; return the Markdown path."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    head = [
        "# gistbot benchmarks", "",
        f"Command: `{command}` ({'quick' if cfg.quick else 'full'} run, {elapsed:.0f} s). "
        f"Fake model latency: replies {cfg.reply_latency * 1000:.0f} ms, summaries "
        f"{cfg.summary_latency * 1000:.0f} ms.", "",
        f"Machine: {machine['cores']} cores, {machine['cpu']}, {machine['memory_gb']} GB, "
        f"Python {machine['python']}, {machine['os']}; {machine['date']}; gistbot "
        f"{machine['commit']} (memory/ and bot/).", "",
    ]
    if machine.get("commit_end", machine["commit"]) != machine["commit"]:
        head += [f"**Warning:** memory/ or bot/ changed during the run (start "
                 f"{machine['commit']}, end {machine['commit_end']}); worker processes "
                 "(scenario 4) ran the newer code.", ""]
    head += ["## Targets", "", markdown(_target_rows(sections)), ""]
    body: list[str] = []
    for s in sections:
        body += [f"## {s.key}. {s.title}", "", markdown(s.rows), ""]
        body += [f"- {note}" for note in s.notes]
        body += [""] if s.notes else []
    path = cfg.out / "results.md"
    path.write_text("\n".join(head + body), encoding="utf-8")
    payload = {
        "command": command, "elapsed_s": elapsed, "machine": machine,
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        "sections": [asdict(s) for s in sections],
    }
    (cfg.out / "results.json").write_text(
        json.dumps(payload, indent=1, default=str, ensure_ascii=False), encoding="utf-8"
    )
    return path


def save_plot(path: Path, title: str, xlabel: str, ylabel: str,
              series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
              *, hline: tuple[float, str] | None = None, log_y: bool = False) -> Path:
    """One line per series (name → (xs, ys)); an optional dashed horizontal line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    for name, (xs, ys) in series.items():
        ax.plot(xs, ys, label=name, linewidth=1.4, marker="." if len(xs) < 40 else None)
    if hline is not None:
        ax.axhline(hline[0], color="grey", linestyle="--", linewidth=1, label=hline[1])
    if log_y:
        ax.set_yscale("log")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def run_recall_scenario(p: argparse.ArgumentParser, a: argparse.Namespace, scenario: int,
                        known: Sequence[str],
                        run: Callable[..., Coroutine[Any, Any, Section]],
                        argv: Sequence[str] | None) -> None:
    """A recall scenario's own entry point (``benchmarks.longmem``, ``benchmarks.dialogue``):
    check ``--methods``, run it offline, print its table, notes and targets and, with
    ``--out``, write ``results.md``/``results.json`` as ``python -m benchmarks`` does."""
    budgets = [int(b) for b in a.budgets.split(",")] if a.budgets else None
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    unknown = set(methods) - set(known)
    if unknown:
        p.error(f"unknown methods: {', '.join(sorted(unknown))}; choose from {', '.join(known)}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from memory.tokens import ensure_offline_encodings

    ensure_offline_encodings()
    started = time.monotonic()
    machine = machine_info()
    sec = asyncio.run(run(a.quick, budgets, seed=a.seed, methods=methods))
    print(markdown(sec.rows))
    print()
    for note in sec.notes:
        print(f"- {note}")
    for t in sec.targets:
        print(f"target: {t.target} — measured {t.measured} — {'met' if t.met else 'NOT met'}")
    if a.out:
        machine["commit_end"] = commit()
        cfg = Config(out=a.out, quick=a.quick, scenarios=(scenario,))
        command = f"python -m {p.prog.split()[-1]} " + shlex.join(
            sys.argv[1:] if argv is None else list(argv))
        path = write_results(cfg, machine, [sec], command, time.monotonic() - started)
        print(f"wrote {path}")
