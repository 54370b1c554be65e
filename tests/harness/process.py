"""``gistbot run`` as a real child process (``tests/bot_child.py``) against the loopback
fakes that run in the test's own event loop: start it, read its log, signal it, wait for
its exit status. Shared by the shutdown and missed-mention tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, is_summary_request
from tests.fakes.slack_api import FakeSlack
from tests.harness.deadlines import scaled

__all__ = ["ROOT", "BotProcess", "bot_process", "reply_requests", "slack_env", "slow_replies"]

ROOT = Path(__file__).resolve().parent.parent.parent


class BotProcess:
    """A running ``gistbot run``; its stderr (the log) is collected line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())
        self.signalled_at: float | None = None
        self.exited_at: float | None = None

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self._changed.set()
        self._changed.set()

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    async def wait_log(self, pattern: str, within: float = 20.0) -> re.Match[str]:
        """The first log line matching ``pattern``; fails (with the log) if it never comes."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + scaled(within)
        while True:
            for line in self.lines:
                if m := rx.search(line):
                    return m
            left = deadline - time.monotonic()
            if left <= 0 or (self._reader.done() and self.proc.returncode is not None):
                raise AssertionError(f"no log line matches {pattern!r}:\n{self.log}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))

    def send(self, sig: int, pid: int | None = None) -> None:
        """Send ``sig`` (to ``pid``, default the child itself) and note when."""
        self.signalled_at = time.monotonic()
        os.kill(pid or self.proc.pid, sig)

    async def wait(self, within: float) -> int:
        """The exit status; fails (with the log) if the process is still running."""
        try:
            code = await asyncio.wait_for(self.proc.wait(), scaled(within))
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(f"still running after {within} s:\n{self.log}") from None
        self.exited_at = time.monotonic()
        await self._reader
        return code

    @property
    def stop_seconds(self) -> float:
        """Seconds from the signal to the exit."""
        assert self.signalled_at is not None and self.exited_at is not None
        return self.exited_at - self.signalled_at


@contextlib.asynccontextmanager
async def bot_process(env: dict[str, str], *, prefix: Sequence[str] = (),
                      console: bool = False) -> AsyncIterator[BotProcess]:
    """Start ``gistbot run`` with ``env`` (``prefix``: e.g. ``unshare …``); killed on exit
    if the test left it running. ``console``: ``gistbot console`` instead, stdin and stdout
    pipes (the console chat in batch mode)."""
    pipe, null = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
    proc = await asyncio.create_subprocess_exec(
        *prefix, sys.executable, "-m", "tests.bot_child", "console" if console else "run",
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **env},
        stdin=pipe if console else null, stdout=pipe if console else null, stderr=pipe,
    )
    bot = BotProcess(proc)
    try:
        yield bot
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        bot._reader.cancel()
        await asyncio.gather(bot._reader, return_exceptions=True)


def slack_env(db_url: str, slack: FakeSlack, llm: FakeOpenAI, secret: str,
              **extra: str) -> dict[str, str]:
    """Settings of a Slack HTTP-mode bot on a free port, talking to the fakes."""
    return {
        "DATABASE_URL": db_url,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_SIGNING_SECRET": secret,
        "GISTBOT_TEST_SLACK_API": slack.api_url,
        "OPENAI_BASE_URL": llm.base_url,
        "MODEL_NAME": "gpt-test",
        "LLM_MAX_RETRIES": "0",
        "LLM_TIMEOUT": "30",
        "PORT": "0",
        "LOG_LEVEL": "INFO",
        **extra,
    }


def slow_replies(seconds: float) -> FakeOpenAI:
    """The loopback model: replies take ``seconds``, summaries are instant."""
    from tests.fakes.openai_server import default_responder

    return FakeOpenAI(responder=default_responder, strict=False,
                      latency=lambda body: 0.0 if is_summary_request(body) else seconds)


def reply_requests(llm: FakeOpenAI) -> int:
    """How many reply (not summary) requests the model got."""
    return sum(not is_summary_request(r.json or {}) for r in llm.chat_requests)


# SIGTERM and SIGINT are what the tests send; re-exported for readability.
SIGTERM, SIGINT, SIGKILL = signal.SIGTERM, signal.SIGINT, signal.SIGKILL
