"""``python -m benchmarks.catchup`` works end to end at a small size: it checks the output
and the budget, not the times."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("psutil")


@pytest.mark.timeout(120)
async def test_catchup_benchmark_writes_its_table(tmp_path: Path) -> None:
    from benchmarks.catchup import main

    out = tmp_path / "catchup.md"
    [row] = await main([400], 2, out)
    assert row["messages"] == 400 and row["calls"] >= 1
    assert row["max_prompt"] <= row["budget"]
    assert row["giant_tokens"] > row["budget"]  # the baseline that does not fit
    table = out.read_text(encoding="utf-8")
    assert "| 400 |" in table and "naive" in table
