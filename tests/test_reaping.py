"""The suite reaps what its tests start: a pytest run (in a child process, with this
suite's conftest) of tests that start a child and then fail, time out in a blocking read,
time out inside the event loop, or orphan a grandchild, leaves no process of theirs
running; and a test's timeout scales with the deadline factor."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.harness.deadlines import ENV, scaled

ROOT = Path(__file__).resolve().parent.parent

INNER = textwrap.dedent('''
    import asyncio
    import os
    import subprocess
    from pathlib import Path

    import pytest

    PIDS = Path(os.environ["PIDS"])


    def note(pid: int) -> None:
        with PIDS.open("a") as f:
            f.write(f"{pid}\\n")


    def test_fails_after_starting_a_child() -> None:
        note(subprocess.Popen(["sleep", "600"]).pid)
        assert False, "fails with its child running"


    @pytest.mark.timeout(2)
    def test_times_out_in_a_blocking_read() -> None:
        proc = subprocess.Popen(["sleep", "600"], stdout=subprocess.PIPE)
        note(proc.pid)
        proc.stdout.read()


    @pytest.mark.timeout(2)
    async def test_times_out_inside_the_event_loop() -> None:
        proc = await asyncio.create_subprocess_exec("sleep", "600")
        note(proc.pid)
        await asyncio.Event().wait()


    def test_orphans_a_grandchild() -> None:
        shell = subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"],
                               capture_output=True, text=True, check=True)
        note(int(shell.stdout))


    @pytest.mark.timeout(2)
    def test_its_timeout_scales(request: pytest.FixtureRequest) -> None:
        assert request.node.get_closest_marker("timeout").kwargs["timeout"] == 3.0
''')


def running(pid: int) -> bool:
    """Whether ``pid`` is a live ``sleep 600`` (not a zombie, not a reused pid)."""
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.cmdline() == ["sleep", "600"]
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_no_child_outlives_a_failed_or_timed_out_test(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    pids = tmp_path / "pids"
    pids.touch()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PIDS": str(pids), ENV: "1.5"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider",
         "-p", "tests.conftest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
         "-W", "default", str(tmp_path / "test_inner.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=scaled(120))
    out = done.stdout + done.stderr
    assert "3 failed, 2 passed" in out, out
    for name in ("test_times_out_in_a_blocking_read", "test_times_out_inside_the_event_loop"):
        assert f"{name} - Failed: Timeout (>3.0s)" in out, out
    assert "a test left a child process running" in out, out
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 4, out
    assert [pid for pid in started if running(pid)] == [], out
