"""The console adapter: chat with gistbot in a terminal, or pipe a conversation through it.

Every line is a message addressed to the bot in one console channel (``--channel``), so
memory, compaction, ``/summary``, ``/reset``, ``/remember <text>``, ``/memory`` and
``/forget <fact id or text>`` behave exactly as on Discord or Slack (the operator at the
terminal may reset and forget).
Works interactively (prompt and a spinner while the model works) and with piped stdin
(plain output, no control characters). End with ``/quit`` or end of input.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import itertools
import sys
import time
import uuid
from collections.abc import Awaitable
from typing import Any, TextIO, TypeVar

from bot.messages import IncomingMessage
from bot.service import ChatService
from bot.shutdown import SHUTDOWN_APOLOGY
from memory.models import ChannelKey

__all__ = ["HELP", "ConsoleChat", "console_key"]

T = TypeVar("T")
HELP = (
    "Commands: /summary  /reset  /remember <text>  /memory  /forget <id or text>  /help  /quit"
    "   (anything else is a message to gistbot)"
)


def console_key(channel: str) -> ChannelKey:
    """The memory key of a console channel."""
    return ChannelKey("console", "local", channel)


class ConsoleChat:
    """A REPL over ``ChatService``; input and output streams are injectable for tests."""

    def __init__(
        self,
        service: ChatService,
        *,
        channel: str = "general",
        user: str | None = None,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
    ) -> None:
        self.service = service
        self.key = console_key(channel)
        self.user = user or _username()
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.interactive = self.stdin.isatty() and self.stdout.isatty()

    def _print(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    async def _lines(self) -> asyncio.StreamReader:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self.stdin)
        return reader

    async def run(self, banner: str = "", *, stop: asyncio.Event | None = None,
                  grace: float = 10.0) -> None:
        """Read lines until ``/quit``, end of input or ``stop`` (SIGTERM/SIGINT): then a
        reply in flight gets ``grace`` seconds before it is given up with an apology."""
        if banner:
            self._print(banner)
        self._print(HELP)
        reader = await self._lines()
        stopping = asyncio.ensure_future((stop or asyncio.Event()).wait())
        try:
            while not stopping.done():
                if self.interactive:
                    self.stdout.write(f"{self.user}> ")
                    self.stdout.flush()
                reading = asyncio.ensure_future(reader.readline())
                await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not reading.done():
                    reading.cancel()
                    break
                raw = reading.result()
                if not raw:
                    break
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line.strip() and not await self._handle_until(line, stopping, grace):
                    break
        finally:
            stopping.cancel()

    async def _handle_until(self, line: str, stopping: asyncio.Future[Any], grace: float) -> bool:
        """``handle(line)``; once ``stopping``, it has ``grace`` seconds left to finish."""
        handling = asyncio.ensure_future(self.handle(line))
        await asyncio.wait({handling, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not handling.done():
            done, _ = await asyncio.wait({handling}, timeout=grace)
            if not done:
                handling.cancel()
                await asyncio.gather(handling, return_exceptions=True)
                self._print(f"gistbot> {SHUTDOWN_APOLOGY}")
                return False
        return handling.result() and not stopping.done()

    async def handle(self, line: str) -> bool:
        """Act on one input line; return False to stop."""
        command = line.strip().lower()
        word, _, rest = line.strip().partition(" ")
        word = word.lower()
        if word in ("/remember", "/forget"):
            if word == "/remember":
                result = await self.service.remember(self.key, rest, author=self.user)
            else:
                result = await self.service.forget(self.key, rest, allowed=True)
            self._print(result.text)
            return True
        if command in ("/quit", "/exit"):
            return False
        if command == "/help":
            self._print(HELP)
        elif command == "/summary":
            result = await self._busy(self.service.summary(self.key))
            self._print(result.text)
        elif command == "/memory":
            self._print((await self.service.memory_list(self.key)).text)
        elif command == "/reset":
            result = await self.service.reset(self.key, allowed=True)
            self._print(result.text)
        elif command.startswith("/") and " " not in command:
            self._print(f"Unknown command {command}. {HELP}")
        else:
            msg = IncomingMessage(self.key, f"console-{uuid.uuid4().hex}", self.user, self.user,
                                  line, time.time(), mentions_bot=True, is_direct=True)
            reply = await self._busy(self.service.on_message(msg))
            if reply is not None:
                self._print(f"gistbot> {reply.text}")
        return True

    async def _busy(self, work: Awaitable[T]) -> T:
        """Await ``work`` showing a spinner when interactive (nothing when piped)."""
        task: asyncio.Future[T] = asyncio.ensure_future(work)
        if not self.interactive:
            return await task
        spinner = asyncio.create_task(self._spin())
        try:
            return await task
        finally:
            spinner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await spinner
            self.stdout.write("\r\x1b[K")
            self.stdout.flush()

    async def _spin(self) -> None:
        for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
            self.stdout.write(f"\r{frame} thinking…")
            self.stdout.flush()
            await asyncio.sleep(0.1)


def _username() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "you"
