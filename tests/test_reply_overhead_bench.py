"""``python -m benchmarks.reply_overhead`` runs end to end: it checks the table, not the
numbers (a short conversation, near-instant fake model)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_prints_each_memory_the_view_and_the_ratio() -> None:
    # The timeout is a hang guard, not a timing.
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.reply_overhead", "--turns", "60",
         "--reply-latency", "0.001", "--summary-latency", "0.001"],
        cwd=ROOT, capture_output=True, text=True, timeout=200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for memory in ("gistbot", "last-25 window", "full history"):
        # 60 turns, a reply every 5th message: 12 replies each
        assert re.search(rf"^\| {memory} \| 12 \| [\d.]+ \| [\d.]+ \|$", out, re.M), out
    assert re.search(r"^gistbot's view: p50 [\d.]+ ms, p95 [\d.]+ ms \(12 views\)$", out, re.M)
    assert re.search(r"^reply p95, gistbot / last-25 window: [\d.]+x \(issue 13: ≤ 1\.1x, "
                     r"(met|missed)\)$", out, re.M), out
