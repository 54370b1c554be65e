"""The console adapter: chat with gistbot in a terminal, or pipe a conversation through it.

Every line is a message addressed to the bot in one console channel (``--channel``), so
memory, compaction, ``/summary``, ``/catchup [since]``, ``/digest …``, ``/reset``,
``/remember <text>``, ``/memory``, ``/forget <fact id or text>`` and ``/config …`` behave
exactly as on Discord or Slack (the operator at the terminal may reset, forget, manage
digests and change settings; a catch-up's citations are plain ``[n: speaker time]``
references, there are no links).

Two modes, chosen by whether stdin and stdout are a terminal:

- **Interactive**: a prompt-toolkit prompt (line editing, ↑/↓ history for the session,
  Ctrl-D or ``/quit`` to leave) and a spinner while the model works. Log records are
  printed above the prompt and above the spinner (``bot.logs.LiveLine``), never into them.
- **Batch** (a file, a pipe or ``/dev/null`` on stdin): one message per line, only the
  answers on stdout (no banner, no prompt, no control characters), exit at end of input.
  Lines are read by a daemon thread, one at a time as they are wanted, so any kind of
  stdin works and a blocked read never holds the process open at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import itertools
import sys
import threading
import time
import uuid
from collections.abc import Awaitable
from typing import Any, TextIO, TypeVar

from bot.catchup_command import Where
from bot.commands.args import Usage
from bot.commands.registry import SPECS
from bot.config_command import Caller
from bot.logs import LiveLine
from bot.messages import IncomingMessage
from bot.service import ChatService
from bot.shutdown import SHUTDOWN_APOLOGY
from memory.models import ChannelKey

__all__ = ["HELP", "ConsoleChat", "console_key", "read_line"]

T = TypeVar("T")
HELP = (
    "Commands: /summary  /catchup [since]  /digest …  /reset  /remember <text>  /memory  "
    "/forget <id or text>  /config …  /help  /quit"
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
        live: LiveLine | None = None,
    ) -> None:
        self.service = service
        self.key = console_key(channel)
        self.user = user or _username()
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.live = live or LiveLine()
        self.interactive = _isatty(self.stdin) and _isatty(self.stdout)

    def _print(self, text: str) -> None:
        with self.live.above():
            self.stdout.write(text + "\n")
            self.stdout.flush()

    async def run(self, banner: str = "", *, stop: asyncio.Event | None = None,
                  grace: float = 10.0) -> None:
        """Read messages until ``/quit``, end of input or ``stop`` (SIGTERM/SIGINT): then a
        reply in flight gets ``grace`` seconds before it is given up with an apology."""
        stopping = asyncio.ensure_future((stop or asyncio.Event()).wait())
        try:
            if self.interactive:
                if banner:
                    self._print(banner)
                self._print(HELP)
                await self._interactive(stopping, grace)
            else:
                await self._batch(stopping, grace)
        finally:
            stopping.cancel()

    async def _interactive(self, stopping: asyncio.Future[Any], grace: float) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory
        from prompt_toolkit.patch_stdout import patch_stdout

        session: PromptSession[str] = PromptSession(history=InMemoryHistory())
        while not stopping.done():
            try:
                # Only while the prompt is up: records written meanwhile go above it.
                with patch_stdout(raw=True):
                    prompt = asyncio.ensure_future(session.prompt_async(f"{self.user}> "))
                    await asyncio.wait({prompt, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    if not prompt.done():  # a signal while waiting for input
                        prompt.cancel()
                        await asyncio.gather(prompt, return_exceptions=True)
                        return
                    line = prompt.result()
            except (EOFError, KeyboardInterrupt):
                return
            if line.strip() and not await self._handle_until(line, stopping, grace):
                return

    async def _batch(self, stopping: asyncio.Future[Any], grace: float) -> None:
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[str | None] = asyncio.Queue()
        wanted = threading.Semaphore(0)
        reader = threading.Thread(
            target=_read_lines, args=(self.stdin, loop, lines, wanted), daemon=True,
            name="console-stdin",
        )
        reader.start()
        while not stopping.done():
            wanted.release()
            getting = asyncio.ensure_future(lines.get())
            await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not getting.done():
                getting.cancel()
                return
            line = getting.result()
            if line is None:
                return
            line = line.rstrip("\r\n")
            if line.strip() and not await self._handle_until(line, stopping, grace):
                return

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
        read = read_line(line)
        if read is not None:  # a command's arguments are read before anything else is done
            name, args = read
            self._print(args.text if isinstance(args, Usage) else await self._command(name, args))
            return True
        if command in ("/quit", "/exit"):
            return False
        if command == "/help":
            self._print(HELP)
        elif command.startswith("/") and " " not in command:
            self._print(f"Unknown command {command}. {HELP}")
        else:
            msg = IncomingMessage(self.key, f"console-{uuid.uuid4().hex}", self.user, self.user,
                                  line, time.time(), mentions_bot=True, is_direct=True)
            reply = await self._busy(self.service.on_message(msg))
            if reply is not None:
                self._print(f"gistbot> {reply.text}")
        return True

    async def _command(self, name: str, args: Any) -> str:
        """Run command ``name`` with its parsed ``args``; the operator at the terminal may
        reset, forget, manage digests and change every setting."""
        service, key = self.service, self.key
        if name == "config":
            caller = Caller(self.user, self.user, may_channel=True, may_server=True)
            return (await service.configure(key, args, caller)).text
        if name == "catchup":  # bot/catchup_command.py
            return (await self._busy(service.catchup(Where(key), self.user, args))).text
        if name == "digest":  # bot/digests.py
            return (await self._busy(service.digest(Where(key), args, allowed=True,
                                                    by=self.user))).text
        if name == "remember":
            return (await service.remember(key, args.text, author=self.user)).text
        if name == "forget":
            return (await service.forget(key, args.text, allowed=True)).text
        if name == "summary":
            return (await self._busy(service.summary(key, self.user))).text
        if name == "memory":
            return (await service.memory_list(key)).text
        return (await service.reset(key, allowed=True)).text

    async def _busy(self, work: Awaitable[T]) -> T:
        """Await ``work`` showing a spinner when interactive (nothing in batch mode)."""
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
            self.live.clear()

    async def _spin(self) -> None:
        for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
            self.live.show(self.stdout, f"{frame} thinking…")
            await asyncio.sleep(0.1)


def read_line(line: str) -> tuple[str, Any] | None:
    """A command line's command name and arguments (a ``Usage`` when its parser can't read
    them); None for a line that is no command of the registry (a message, /help, /quit)."""
    word, rest = ([*line.strip().split(None, 1), ""])[:2]
    spec = SPECS.get(word.lower().removeprefix("/")) if word.startswith("/") else None
    return None if spec is None else (spec.name, spec.parse(rest))


def _read_lines(
    stdin: TextIO,
    loop: asyncio.AbstractEventLoop,
    lines: asyncio.Queue[str | None],
    wanted: threading.Semaphore,
) -> None:
    """Read one line each time one is ``wanted``; ``None`` at end of input (or on an error
    reading it, which ends the chat like end of input does)."""
    raw = getattr(stdin, "buffer", None)
    while True:
        wanted.acquire()
        line: str | None
        try:
            if raw is not None:
                data = raw.readline()
                line = data.decode("utf-8", "replace") if data else None
            else:
                line = stdin.readline() or None
        except (OSError, ValueError):
            line = None
        try:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        except RuntimeError:  # the loop is gone: the chat ended
            return
        if line is None:
            return


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _username() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "you"
