"""Helpers shared by the reliability and security tests (bad input, faults, soak, isolation,
abuse). The platform harnesses themselves stay in ``tests/test_discord_adapter.py`` and
``tests/test_slack_adapter.py`` and are imported from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import socket
import struct
from collections.abc import Iterable
from typing import Any

import pytest

from adapters.slack_text import WORD_JOINER
from memory.stores.sqlite.store import SqliteStore

__all__ = [
    "LIVE_SLACK_PING",
    "ResettingProxy",
    "assert_no_slack_ping",
    "quick_busy_timeout",
    "records",
]

# What Slack would turn into a notification: a broadcast or user/group control sequence, or a
# bare @here/@channel/@everyone not defused by a WORD JOINER.
LIVE_SLACK_PING = re.compile(
    r"<!(?:here|channel|everyone|group|subteam)|<@[UWB]|(?<![\w@])@(?:here|channel|everyone)\b",
    re.IGNORECASE,
)


def assert_no_slack_ping(texts: Iterable[str]) -> None:
    """Fail if any text Slack would show could notify someone."""
    for text in texts:
        m = LIVE_SLACK_PING.search(text)
        assert m is None, f"live ping {m.group(0)!r} in {text[:200]!r}"
        assert WORD_JOINER not in text or "@" in text  # the defused form keeps its '@'


def records(caplog: pytest.LogCaptureFixture, level: int, *needles: str) -> list[str]:
    """Messages (with exception text) at ``level`` or above that contain every needle."""
    out = []
    for r in caplog.records:
        if r.levelno < level:
            continue
        text = r.getMessage() + ("\n" + r.exc_text if r.exc_text else "")
        if all(n in text for n in needles):
            out.append(text)
    return out


@pytest.fixture
def quick_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runtimes built in the test wait 0.2 s (not 5 s) for a locked database."""
    monkeypatch.setattr("bot.app.SqliteStore", functools.partial(SqliteStore, busy_timeout=0.2))


class ResettingProxy:
    """A TCP proxy on loopback that answers the next ``resets`` requests with a TCP reset
    (RST: SO_LINGER 0 then close), whichever connection they arrive on, and pipes the rest."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.resets = 0
        self.reset_done = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        """The OpenAI base URL through the proxy."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> ResettingProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    @staticmethod
    def _rst(writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            self._rst(writer)
            return

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, check: bool) -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while data := await src.read(65536):
                    if check and self.resets > 0:
                        self.resets -= 1
                        self.reset_done += 1
                        self._rst(writer)
                        up_w.transport.abort()
                        return
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        try:
            await asyncio.gather(pump(reader, up_w, True), pump(up_r, writer, False))
        finally:
            self._tasks.discard(task)

