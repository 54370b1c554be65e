"""``python -m benchmarks.summarizer_cost``: scenario 1's gistbot phase alone. Checks that
it runs end to end and what it counts as a retry, not the numbers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.responder import Call
from benchmarks.summarizer_cost import is_retry
from memory.models import ChannelKey, Turn
from memory.summary_prompt import build_retry_request, build_summary_request

ROOT = Path(__file__).resolve().parents[1]
TURNS = [Turn(ChannelKey("t", "g", "c"), 1, "m1", "user", "u1", "Ann", "ticket INC-42 is open",
              5, 0.0)]


def test_a_retry_is_told_from_a_first_request() -> None:
    first = build_summary_request("", (), TURNS, max_tokens=600, archive=True)
    retry = build_retry_request("## Topics\n- a ticket", TURNS, ["INC-42"], max_tokens=600)
    assert not is_retry(Call("m", "summary", {"messages": first}, ""))
    assert is_retry(Call("m", "summary", {"messages": retry}, ""))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_prints_one_row_per_summary_latency() -> None:
    # The timeout is a hang guard, not a timing.
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.summarizer_cost", "--turns", "120",
         "--reply-latency", "0.001", "--summary-latency", "0.001", "0.002"],
        cwd=ROOT, capture_output=True, text=True, timeout=280,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = re.findall(r"^\| (0\.00[12]) \| (\d+) \| (\d+) \| ([\d,]+) \| [\d,]+ \| ([\d,]+) \| "
                      r"([\d.]+)% \| (\d+) \|.* (met|MISSED)$", proc.stdout, re.M)
    assert [r[0] for r in rows] == ["0.001", "0.002"], proc.stdout
    for _, calls, retries, summ, total, share, compactions, _ in rows:
        assert int(calls) == int(compactions) + int(retries) and int(compactions) >= 1
        ratio = int(summ.replace(",", "")) / int(total.replace(",", ""))
        assert abs(ratio * 100 - float(share)) < 0.06
