"""Optional parts whose library is missing: ``gistbot run`` says so in one line naming the
extra (exit 2) before starting anything, and ``gistbot doctor`` fails the same check.

The real program in a subprocess whose interpreter cannot import the library
(``sys.modules[name] = None``: the ``ModuleNotFoundError`` an install without it raises).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.extras import install_command
from tests.harness.console import ROOT, console_env

pytestmark = pytest.mark.slow

DISCORD = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GAbCdE.fghijklmnopqrstuvwxyz0123456789"
SLACK = {"SLACK_BOT_TOKEN": "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp",
         "SLACK_APP_TOKEN": "xapp-1-A0123456789-1234567890-abcdefabcdef"}
_WITHOUT = (
    "import sys\n"
    "for name in sys.argv[1].split(','): sys.modules[name] = None\n"
    "from bot.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def gistbot_without(tmp_path: Path, libraries: str, *args: str,
                    **settings: str) -> subprocess.CompletedProcess[str]:
    """``gistbot ARGS`` where ``libraries`` (comma-separated) cannot be imported."""
    env = {**console_env(tmp_path, **settings), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, libraries, "--env-file", os.devnull, *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=tmp_path, env=env,
        timeout=120, check=False,
    )


def test_run_without_aiohttp_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    done = gistbot_without(tmp_path, "aiohttp", "run", DISCORD_TOKEN=DISCORD)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "gistbot: Discord support is not installed (no module aiohttp): "
        f"{install_command(['discord'])} (or unset DISCORD_TOKEN)"
    ]
    assert "[discord]'" in done.stderr
    assert not (tmp_path / "gistbot.db").exists()  # nothing started


def test_both_platforms_missing_are_one_line_and_one_command(tmp_path: Path) -> None:
    done = gistbot_without(tmp_path, "aiohttp,discord,slack_bolt", "run",
                           DISCORD_TOKEN=DISCORD, **SLACK)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert "Discord support and Slack support are not installed" in line
    assert "[discord,slack]'" in line and "unset DISCORD_TOKEN and SLACK_BOT_TOKEN" in line


def test_postgres_without_asyncpg_is_one_line(tmp_path: Path) -> None:
    done = gistbot_without(tmp_path, "asyncpg", "channels",
                           DATABASE_URL="postgresql://gist@127.0.0.1:9/test")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert "PostgreSQL support is not installed (no module asyncpg)" in line
    assert "[postgres]'" in line


def test_doctor_fails_the_check_run_would_fail(tmp_path: Path) -> None:
    done = gistbot_without(tmp_path, "aiohttp", "doctor", DISCORD_TOKEN=DISCORD)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "gistbot doctor: 1 check failed:"
    assert lines[1].startswith("  install    FAILED: Discord support is not installed (no "
                               "module aiohttp): pip install")
    assert "All checks passed" not in done.stdout and "Traceback" not in done.stderr
