"""``python -m benchmarks.reply_overhead --quick`` runs end to end: it checks the report, not
the numbers (a short conversation, near-instant fake model, small stores)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.ops import gc_tuning

pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[1]
NUM = r"[\d.]+"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_quick_run_reports_replies_collectors_the_view_at_scale_and_the_ratios() -> None:
    # The timeout is a hang guard, not a timing.
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.reply_overhead", "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert re.search(r"^machine: \d+ cores, .+, Python [\d.]+;", out, re.M), out
    assert re.search(rf"^load average at start: {NUM} {NUM} {NUM}$", out, re.M), out
    assert re.search(rf"^load average at end: {NUM} {NUM} {NUM}$", out, re.M), out
    assert f"gistbot {gc_tuning.THRESHOLDS} with the start-up heap frozen" in out
    for setting in ("interpreter", "gistbot"):
        # 60 turns, a reply every 5th message: 12 replies each; gistbot's views timed
        assert re.search(rf"^\| 1 ms \| {setting} \| gistbot \| 12 \| {NUM} \| {NUM} \| "
                         rf"{NUM} \| {NUM} \| \d+/\d+/\d+ \({NUM} ms, longest {NUM}\) \|$",
                         out, re.M), out
        assert re.search(rf"^\| 1 ms \| {setting} \| last-25 window \| 12 \| {NUM} \| {NUM} \| "
                         r"– \| – \| ", out, re.M), out
        assert re.search(rf"^reply p95, gistbot / last-25 window, 1 ms model, {setting} "
                         rf"collector: {NUM}x \(no target\)$", out, re.M), out
    for size in ("500", "2,000"):  # 40 questions, the first 20 untimed
        assert re.search(rf"^\| {size} \| {NUM} \| \d+ \| 20 \| {NUM} \| {NUM} \| {NUM} \| "
                         rf"{NUM} \|$", out, re.M), out
    assert re.search(rf"^view p95, 2,000 / 500 stored turns: {NUM}x \(target ≤ 2\.0x, "
                     rf"(met|missed)\); view CPU p95: {NUM}x$", out, re.M), out


def test_the_targets_are_the_settled_ones() -> None:
    from benchmarks import reply_overhead

    assert reply_overhead.TARGETS == {1.0: 1.05, 0.1: 1.2}
    assert reply_overhead.SCALE_TARGET == 2.0
