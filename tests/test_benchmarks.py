"""``python -m benchmarks --quick`` works end to end: it checks the outputs, not the numbers.

Runs the real command in a subprocess (its own event loop, fake server and worker
processes) into a temporary folder, then reads what it wrote. Needs the ``bench`` extra
(LangChain, matplotlib, psutil); skipped without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langchain_classic")
pytest.importorskip("langchain_openai")
pytest.importorskip("matplotlib")
pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[1]
MEMORIES = ["gistbot", "full history", "last-25 window", "LangChain summary buffer"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Run the quick benchmark once for every test here; (output folder, stdout)."""
    out = tmp_path_factory.mktemp("bench")
    # The timeout is a hang guard, not a timing: ~60 s on an idle machine, past 120 s on a
    # loaded one (the tests' own limit, which covers this fixture, is above it).
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_writes_table_json_and_plots(results: tuple[Path, str]) -> None:
    out, stdout = results
    table = (out / "results.md").read_text(encoding="utf-8")
    for heading in ("## Targets", "## 1. Prompt size and cost",
                    "## 2. Reply latency under slow summaries", "## 3. Ingest and view",
                    "## 4. Scale", "## 5. Fact retention"):
        assert heading in table
    for memory in MEMORIES:
        assert f"| {memory} |" in table
    for png in ("prompt_tokens.png", "reply_latency.png", "scale_rss.png"):
        assert (out / png).read_bytes()[:8] == PNG_MAGIC, png
    assert "scenario 1" in stdout and "scenario 4" in stdout  # progress was printed


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_json_has_machine_rows_and_targets(results: tuple[Path, str]) -> None:
    out, _ = results
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {"cores", "cpu", "python"} <= set(data["machine"])
    sections = {s["key"]: s for s in data["sections"]}
    assert sorted(sections) == ["1", "2", "3", "4", "5"]
    assert [r["memory"] for r in sections["1"]["rows"]] == MEMORIES
    first = sections["1"]["rows"][0]
    for column in ("max prompt tokens", "mean prompt tokens", "prompts over budget",
                   "summarizer calls", "summarizer tokens", "total tokens", "reply p50 ms",
                   "reply p95 ms"):
        assert column in first
    assert all(r["replies"] > 0 for r in sections["1"]["rows"])
    assert [r["mode"] for r in sections["2"]["rows"]][:2] == ["summarization off",
                                                              "summarization on"]
    assert len(sections["4"]["rows"]) == 3
    assert {r["memory"] for r in sections["5"]["rows"]} >= {"gistbot",
                                                            "LangChain summary buffer"}
    assert all(isinstance(r["in the probe's prompt, one at a time"], int)
               for r in sections["5"]["rows"])  # issue 13: each probe on a fresh copy
    grouped = [r for r in sections["5"]["rows"] if "4 identifiers" in r["memory"]]
    assert [r["planted"] for r in grouped] == [40]  # issue 32: questions 4 identifiers answer
    assert any("grouped identifiers in the probe's prompt 40/40" in t["target"]
               for t in sections["5"]["targets"])
    targets = [t for s in data["sections"] for t in s["targets"]]
    assert len(targets) == 14
    assert all(t["measured"] for t in targets)
    issue13 = [t["target"] for t in sections["1"]["targets"] if "(issue 13)" in t["target"]]
    assert issue13 == ["≤ 100 summarizer calls (issue 13)",  # as the issue states them
                       "total tokens ≤ 0.5x LangChain's (issue 13)",
                       "reply p95 ≤ 1.1x the last-25 window's (issue 13)"]
