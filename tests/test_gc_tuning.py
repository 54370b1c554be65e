"""The garbage collector of a running gistbot: tuned once start-up is done
(``bot.ops.gc_tuning``), by the ``gistbot`` entry point itself."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from bot.ops import gc_tuning
from tests.harness.console import ROOT, USER, console_env

# Run in a child: the interpreter's own setting, read at exit (after the runtime closed,
# the tuned setting is still in force).
PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("GC", *gc.get_threshold(), gc.get_freeze_count(),
                              file=sys.stderr))
from bot.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def interpreter_setting() -> Iterator[None]:
    """This test process's collector as it was, whatever the test did to it."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_tune_freezes_the_heap_and_sets_the_thresholds(interpreter_setting: None) -> None:
    gc.unfreeze()
    setting = gc_tuning.tune()
    assert gc.get_threshold() == gc_tuning.THRESHOLDS == setting.thresholds
    assert gc.get_freeze_count() == setting.frozen > 10_000  # the imported modules, at least
    assert gc_tuning.THRESHOLDS[0] > gc_tuning.DEFAULT_THRESHOLDS[0]
    restored = gc_tuning.restore()
    assert restored == gc_tuning.GcSetting(gc_tuning.DEFAULT_THRESHOLDS, 0)
    assert gc.get_threshold() == gc_tuning.DEFAULT_THRESHOLDS and gc.get_freeze_count() == 0


def _gc_at_exit(tmp_path: Path, *args: str) -> tuple[int, int, int, int]:
    """Run ``gistbot ARGS`` (one console message on stdin) in a child; its collector's
    thresholds and frozen count as it exits."""
    (tmp_path / "in.txt").write_text("hello there\n")
    env = console_env(tmp_path, LOG_LEVEL="WARNING", PYTHONPATH=str(ROOT))
    with open(tmp_path / "in.txt", "rb") as stdin:
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, "--env-file", os.devnull, *args],
            stdin=stdin, capture_output=True, text=True, cwd=str(tmp_path), env=env,
            timeout=120, check=False,
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("GC "))
    a, b, c, frozen = (int(v) for v in line.split()[1:])
    return a, b, c, frozen


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_the_console_runs_with_the_tuned_collector(tmp_path: Path) -> None:
    # The timeout is a hang guard, not a timing.
    a, b, c, frozen = _gc_at_exit(tmp_path, "console")
    assert (a, b, c) == gc_tuning.THRESHOLDS
    assert frozen > 10_000


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_run_without_platforms_chats_in_the_terminal_tuned(tmp_path: Path) -> None:
    # ``run`` with no platform chats only at a terminal: a pseudo-terminal, then Ctrl-D.
    env = console_env(tmp_path, LOG_LEVEL="WARNING", PYTHONPATH=str(ROOT))
    child = pexpect.spawn(sys.executable, ["-c", PROBE, "--env-file", os.devnull, "run"],
                          cwd=str(tmp_path), env=env, encoding="utf-8", timeout=60,
                          dimensions=(40, 200))
    try:
        child.expect(f"{USER}>")
        child.sendeof()
        child.expect(r"GC (\d+) (\d+) (\d+) (\d+)")
        a, b, c, frozen = (int(v) for v in child.match.groups())
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert (a, b, c) == gc_tuning.THRESHOLDS
    assert frozen > 10_000


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_one_shot_command_keeps_the_interpreters_collector(tmp_path: Path) -> None:
    # ``channels`` reads and exits: nothing long-running to tune for.
    a, b, c, frozen = _gc_at_exit(tmp_path, "channels")
    assert (a, b, c) == gc_tuning.DEFAULT_THRESHOLDS
    assert frozen == 0
