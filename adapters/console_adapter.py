"""The console adapter: chat with gistbot in a terminal, or pipe a conversation through it.

Every line is a message addressed to the bot in one console channel (``--channel``), so
memory, compaction, ``/summary``, ``/catchup [since]``, ``/digest …``, ``/reset``,
``/remember <text>``, ``/memory`` and ``/forget <fact id or text>`` behave exactly as on
Discord or Slack (the operator at the terminal may reset, forget and manage digests; a
catch-up's citations are plain ``[n: speaker time]`` references, there are no links).
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
from typing import TextIO, TypeVar

from bot.catchup_command import Where
from bot.messages import IncomingMessage
from bot.service import ChatService
from memory.models import ChannelKey

__all__ = ["HELP", "ConsoleChat", "console_key"]

T = TypeVar("T")
HELP = (
    "Commands: /summary  /catchup [since]  /digest …  /reset  /remember <text>  /memory  "
    "/forget <id or text>  /help  /quit"
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

    async def run(self, banner: str = "") -> None:
        """Read lines until ``/quit`` or end of input."""
        if banner:
            self._print(banner)
        self._print(HELP)
        reader = await self._lines()
        while True:
            if self.interactive:
                self.stdout.write(f"{self.user}> ")
                self.stdout.flush()
            raw = await reader.readline()
            if not raw:
                break
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line.strip():
                continue
            if not await self.handle(line):
                break

    async def handle(self, line: str) -> bool:
        """Act on one input line; return False to stop."""
        command = line.strip().lower()
        word, _, rest = line.strip().partition(" ")
        word = word.lower()
        if word in ("/catchup", "/digest"):  # bot/catchup_command.py, bot/digests.py
            where = Where(self.key)
            result = await self._busy(
                self.service.catchup(where, self.user, rest) if word == "/catchup"
                else self.service.digest(where, rest, allowed=True, by=self.user))
            self._print(result.text)
            return True
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
