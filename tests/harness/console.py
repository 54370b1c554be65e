"""The console harness: the real ``gistbot`` program in a pseudo-terminal (``pexpect``), or
with a file or ``/dev/null`` on stdin, so tests see what a person at a terminal sees.

A pty merges stdout and stderr as a terminal does, so a log line printed into the chat shows
in ``Terminal.transcript``. Expectations are awaited (``async_=True``) so a loopback
OpenAI fake in the same event loop keeps answering while the test waits.
"""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pexpect

__all__ = [
    "ANSI",
    "ROOT",
    "USER",
    "Terminal",
    "batch",
    "closed_port",
    "console_env",
    "plain",
]

ROOT = Path(__file__).resolve().parents[2]
USER = "tester"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]")
_PASSED = ("PATH", "TIKTOKEN_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH")


def plain(text: str) -> str:
    """``text`` without terminal control sequences (what a person reads)."""
    return ANSI.sub("", text)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def console_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a fresh user: no settings but ``settings``, memory in
    ``tmp_path``, the default ``LOG_LEVEL`` unless given."""
    env = {k: v for k, v in os.environ.items() if k in _PASSED}
    env.update(
        HOME=str(tmp_path), USER=USER, LOGNAME=USER, TERM="xterm", LANG="C.UTF-8",
        # pexpect does not answer cursor position requests as a terminal emulator does.
        PROMPT_TOOLKIT_NO_CPR="1",
        DATABASE_URL=f"sqlite:///{tmp_path}/gistbot.db",
    )
    env.update(settings)
    return env


class Terminal:
    """``gistbot ARGS`` in a 40×200 pty; ``transcript`` is everything it printed."""

    def __init__(self, tmp_path: Path, *args: str, env: Mapping[str, str]) -> None:
        self.log = io.StringIO()
        self.child = pexpect.spawn(
            sys.executable, ["-m", "bot", "--env-file", os.devnull, *args],
            cwd=str(tmp_path), env=dict(env), encoding="utf-8", codec_errors="replace",
            timeout=60, dimensions=(40, 200),
        )
        self.child.logfile_read = self.log

    def close(self) -> None:
        """End the process if it still runs (SIGHUP, SIGINT, then SIGKILL) and wait for it."""
        self.child.close(force=True)

    @property
    def transcript(self) -> str:
        """Everything printed so far, control sequences included."""
        return self.log.getvalue()

    async def expect(self, pattern: str) -> None:
        """Wait until ``pattern`` (a regular expression) is printed."""
        await self.child.expect(pattern, async_=True)

    async def prompt(self) -> None:
        """Wait for the input prompt."""
        await self.expect(f"{USER}>")

    def type(self, keys: str) -> None:
        """Type ``keys`` (``\\r`` is Enter, ``\\x1b[D`` ←, ``\\x1b[A`` ↑)."""
        self.child.send(keys)

    async def say(self, text: str) -> None:
        """Send one message at the prompt and wait for the answer and the next prompt."""
        await self.prompt()
        self.type(text + "\r")
        await self.expect("gistbot> ")

    async def quit(self) -> int:
        """End input (Ctrl-D) and return the exit status."""
        await self.prompt()
        self.child.sendeof()
        await self.child.expect(pexpect.EOF, async_=True)
        self.child.close()
        status: int = self.child.exitstatus if self.child.exitstatus is not None else -1
        return status


def batch(
    tmp_path: Path, *args: str, stdin: Path | str, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """``gistbot ARGS < stdin`` (a file, or ``/dev/null``), stdout and stderr apart."""
    with open(stdin, "rb") as fh:
        return subprocess.run(
            [sys.executable, "-m", "bot", "--env-file", os.devnull, *args],
            stdin=fh, capture_output=True, text=True, cwd=str(tmp_path), env=dict(env),
            timeout=120, check=False,
        )
