"""The documentation's benchmark numbers are those of the latest results files: the blocks
``benchmarks.docs_numbers`` generates from ``benchmarks/results/*.md`` are checked against
them, so a new run cannot leave the previous numbers in the docs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from benchmarks.docs_numbers import DOCS, RESULTS, check, table_rows, update

PERFORMANCE = DOCS[0]


def test_the_docs_quote_the_latest_results() -> None:
    text = PERFORMANCE.read_text(encoding="utf-8")
    assert "<!-- results:longmem -->" in text  # the check below is not vacuous
    assert check(DOCS) == [], "run python -m benchmarks.docs_numbers"


def test_a_number_that_differs_from_the_results_file_fails_the_check(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    shutil.copyfile(PERFORMANCE, doc)
    text = doc.read_text(encoding="utf-8")
    block = text[text.index("<!-- results:longmem -->"):text.index("<!-- /results:longmem -->")]
    first = re.search(r"\| gistbot \| [\d,]+ \| ([\d.]+)%", block)
    assert first is not None
    planted = block.replace(first.group(0), first.group(0).replace(first.group(1), "12.3"), 1)
    doc.write_text(text.replace(block, planted), encoding="utf-8")
    assert check([doc]) == ["performance.md: results:longmem"]
    assert update([doc]) == [doc] and check([doc]) == []  # regenerating repairs it
    assert doc.read_text(encoding="utf-8") == text


def test_a_newer_results_file_makes_the_docs_stale(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    longmem = results / "longmem.md"
    row = table_rows(longmem.read_text(encoding="utf-8"), "method")[0]
    share = row["evidence in prompt %"]
    cell = f"| {row['method']} | {row['budget']} | {row['questions']} | {share} |"
    text = longmem.read_text(encoding="utf-8")
    assert cell in text
    longmem.write_text(text.replace(cell, cell.replace(share, "1.5"), 1),
                       encoding="utf-8")
    assert check([PERFORMANCE], results) == ["performance.md: results:longmem"]


def test_the_results_targets_agree_with_their_table() -> None:
    text = (RESULTS / "longmem.md").read_text(encoding="utf-8")
    shares = {r["budget"].replace(",", ""): float(r["evidence in prompt %"])
              for r in table_rows(text, "method") if r["method"] == "gistbot"}
    quoted = dict(re.findall(r"(\d+): ([\d.]+) vs [\d.]+", text))
    assert quoted and {b: float(v) for b, v in quoted.items()} == {
        b: round(v, 1) for b, v in shares.items()}
