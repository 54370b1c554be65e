"""The scenario-6 numbers the documentation quotes are those of the latest results file
(``benchmarks/results/longmem.md``, written by ``python -m benchmarks.longmem --out``), so
a new run cannot leave the previous numbers in the docs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "longmem.md"
QUOTING = [ROOT / "docs" / "performance.md", ROOT / "benchmarks" / "results" / "results.md"]


def _shares(method: str) -> list[str]:
    """Evidence-in-prompt % of ``method`` at each budget, in the results table's order."""
    rows = re.findall(rf"^\| {re.escape(method)} \| [\d,]+ \| [\d,]+ \| ([\d.]+) \|",
                      RESULTS.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(rows) == 4, f"{RESULTS.name}: expected four budgets for {method}"
    return [f"{float(r):.1f}" for r in rows]


def test_the_docs_quote_the_latest_scenario_6_results() -> None:
    gistbot = " / ".join(_shares("gistbot")) + "%"
    bm25 = " / ".join(_shares("BM25 over raw turns")) + "%"
    for path in QUOTING:
        text = path.read_text(encoding="utf-8")
        assert gistbot in text, f"{path.name} does not quote gistbot's latest {gistbot}"
        assert bm25 in text, f"{path.name} does not quote BM25's latest {bm25}"


def test_the_results_targets_agree_with_the_table() -> None:
    text = RESULTS.read_text(encoding="utf-8")
    shares = _shares("gistbot")
    quoted = re.search(r"1000: ([\d.]+) vs [\d.]+, 2000: ([\d.]+) vs [\d.]+, "
                       r"4000: ([\d.]+) vs [\d.]+, 7024: ([\d.]+) vs", text)
    assert quoted is not None
    assert [f"{float(x):.1f}" for x in quoted.groups()] == shares
