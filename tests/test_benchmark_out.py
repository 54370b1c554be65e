"""``python -m benchmarks`` without ``--out`` (issue 15) writes to a new temporary folder,
never over the committed ``benchmarks/results/``; ``--update-results`` is the way to
publish new numbers."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import pytest

import benchmarks.__main__ as bench
from benchmarks.common import Section

COMMITTED = Path(bench.__file__).parent / "results"


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_default_output_is_a_fresh_temporary_folder(temp_root: Path) -> None:
    first, second = bench.parse_args([]).out, bench.parse_args(["--quick"]).out
    assert first != second and first != COMMITTED
    assert first.parent == temp_root and second.parent == temp_root


def test_update_results_and_out_choose_the_folder(tmp_path: Path) -> None:
    assert bench.parse_args(["--update-results"]).out == COMMITTED
    assert bench.parse_args(["--out", str(tmp_path / "x")]).out == tmp_path / "x"
    with pytest.raises(SystemExit):
        bench.parse_args(["--update-results", "--out", str(tmp_path)])


def test_a_run_without_out_leaves_the_committed_results_alone(
    temp_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def one_section(cfg: object) -> list[Section]:
        return [Section("1", "stand-in", [{"claim": "x", "measured": 1}], [])]

    monkeypatch.setattr(bench, "run_all", one_section)
    before = digest(COMMITTED)
    bench.main(["--quick", "--scenarios", "1"])
    assert digest(COMMITTED) == before
    [written] = list(temp_root.glob("gistbot-benchmarks-*/results.md"))
    assert "stand-in" in written.read_text(encoding="utf-8")
    assert f"plots to {written.parent}" in capsys.readouterr().out  # says where it wrote
