"""The console adapter: chat with gistbot in a terminal, or pipe a conversation through it.

Every line is a message to the bot in one console channel (``--channel``), with the same
memory as on Discord or Slack; a line starting with a registry command
(``bot.commands.registry``) runs it, with the operator's rights (no links in citations).
``/quit`` (or ``/exit``) is the console's own.

- **Interactive** (stdin and stdout a terminal): prompt-toolkit with history kept across
  runs (:func:`history_path`) and a spinner. Ctrl-C clears the line or cancels the request
  ("cancelled"); a second Ctrl-C on an empty line, Ctrl-D or ``/quit`` leaves (status 0).
  Log records print above the prompt and the spinner (``bot.ops.logs.LiveLine``).
- **Batch** (a file, a pipe or ``/dev/null``): one message per line in, one bare answer per
  line out (``\n`` and ``\\`` escaped), or JSON Lines with ``json_lines``; status 130 on
  SIGINT. Lines between two :data:`FENCE` lines are one message (never a command); blank
  lines outside are skipped and said on stderr. A daemon thread reads lines as they are
  wanted, so any stdin works and a blocked read never holds the process open.

SIGINT reaches :meth:`ConsoleChat.interrupt`; :data:`PLATFORM` (the ``console`` entry point)
starts a chat for the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import itertools
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from bot.platform import (
    COMMANDS,
    OPEN,
    SHUTDOWN_APOLOGY,
    Access,
    ChannelKey,
    Features,
    IncomingMessage,
    Launch,
    LiveLine,
    Permission,
    Platform,
    Post,
    Registry,
    ReplyFlow,
    Usage,
    Where,
    plural,
    posix_locale,
    reply_grace,
)

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import History

__all__ = ["CANCELLED", "FENCE", "PLATFORM", "QUIT_HINT", "ConsoleChat", "ConsoleContext",
           "console_key", "history_path", "read_line", "serve"]

T = TypeVar("T")
QUIT = "/quit — leave (Ctrl-D too)"


def banner_help(commands: Registry) -> str:
    """The one line shown at the start: every command's name, /quit, and what else is."""
    names = "  ".join(f"/{n}" for n in commands.names())
    return f"Commands: {names}  /quit   (/help <command> says more; anything else is a " \
           "message to gistbot)"



CANCELLED = "cancelled"
FENCE = '"""'  # batch mode: a line that is only this starts, then ends, a multi-line message
QUIT_HINT = "(Ctrl-C again or Ctrl-D to quit)"
INTERRUPTED_STATUS = 128 + 2  # SIGINT, as a shell reports it


class _Interrupt(Exception):
    """Ctrl-C at the prompt; ``had_text``: the line was not empty (so it is only cleared)."""

    def __init__(self, had_text: bool) -> None:
        super().__init__("interrupted")
        self.had_text = had_text


def console_key(channel: str) -> ChannelKey:
    """The memory key of a console channel."""
    return ChannelKey("console", "local", channel)


def history_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the prompt's history is kept: ``$XDG_STATE_HOME/gistbot/history``, by default
    ``~/.local/state/gistbot/history`` (the XDG base directory rules)."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "gistbot" / "history"


def _history() -> History:
    """The history file, private to the user (it holds what was said); in memory only when
    it cannot be created (a read-only home)."""
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    path = history_path()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(path))


class ConsoleChat:
    """A REPL over ``ChatService``; input and output streams are injectable for tests."""

    def __init__(
        self,
        features: Features,
        *,
        channel: str = "general",
        user: str | None = None,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        live: LiveLine | None = None,
        json_lines: bool = False,
        commands: Registry = COMMANDS,
    ) -> None:
        self.service, self.features = features.service, features
        self.commands = commands
        self.key = console_key(channel)
        self.user = user or _username()
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr  # batch mode's notices (stdout holds only answers)
        self.live = live or LiveLine()
        self.interactive = _isatty(self.stdin) and _isatty(self.stdout)
        self.json_lines = json_lines  # batch mode: JSON Lines instead of bare answers
        self.locale = posix_locale(os.environ)  # how /catchup reads 2/12 (LC_TIME, LANG)
        self._line = ""  # the input line being answered (batch output names it)
        self._inflight: asyncio.Future[bool] | None = None
        self._session: PromptSession[str] | None = None
        self._interrupted = asyncio.Event()  # batch mode: SIGINT, stop with status 130
        self.flow = ReplyFlow(_Terminal(self))  # replies are printed, never stored as posts

    def _print(self, text: str, prefix: str = "") -> None:
        """Write one answer: in a terminal as it is (``prefix`` first); in batch mode on one
        line, bare or as JSON."""
        if self.interactive:
            out = prefix + text
        elif self.json_lines:
            out = json.dumps({"input": self._line, "output": text}, ensure_ascii=False)
        else:
            out = text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")
        with self.live.above():
            self.stdout.write(out + "\n")
            self.stdout.flush()

    def interrupt(self) -> None:
        """Ctrl-C (SIGINT): cancel the request in flight; at the prompt, clear the line; in
        batch mode, stop at once (``run`` returns 130)."""
        inflight = self._inflight
        if not self.interactive:
            self._interrupted.set()
        if inflight is not None and not inflight.done():
            inflight.cancel()
            return
        app = self._session.app if self._session is not None else None
        if app is not None and app.is_running:
            with contextlib.suppress(Exception):  # already leaving
                app.exit(exception=_Interrupt(bool(app.current_buffer.text)))

    async def run(self, banner: str = "", *, stop: asyncio.Event | None = None,
                  grace: float = 10.0) -> int:
        """Read messages until ``/quit``, end of input or ``stop`` (SIGTERM): then a reply
        in flight gets ``grace`` seconds before it is given up with an apology. Returns the
        exit status: 0, or 130 when batch mode was interrupted."""
        stopping = asyncio.ensure_future(_either(stop or asyncio.Event(), self._interrupted))
        try:
            if self.interactive:
                if banner:
                    self._print(banner)
                self._print(banner_help(self.commands))
                await self._interactive(stopping, grace)
            else:
                await self._batch(stopping, grace)
        finally:
            stopping.cancel()
        return INTERRUPTED_STATUS if self._interrupted.is_set() else 0

    async def _interactive(self, stopping: asyncio.Future[Any], grace: float) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
        from prompt_toolkit.patch_stdout import patch_stdout

        keys = KeyBindings()

        @keys.add("c-c")
        def _clear(event: KeyPressEvent) -> None:
            # An ordinary exception, not KeyboardInterrupt: asyncio re-raises that one out
            # of the event loop from the prompt's task.
            event.app.exit(exception=_Interrupt(bool(event.current_buffer.text)),
                           style="class:aborting")

        session: PromptSession[str] = PromptSession(history=_history(), key_bindings=keys)
        self._session = session
        armed = False  # Ctrl-C on an empty line once: a second one leaves
        while not stopping.done():
            try:
                # Only while the prompt is up: records written meanwhile go above it.
                with patch_stdout(raw=True):
                    # SIGINT stays ours (``interrupt``): the prompt would take it over and
                    # leave a no-op in its place, so Ctrl-C during a request did nothing.
                    prompt = asyncio.ensure_future(
                        session.prompt_async(f"{self.user}> ", handle_sigint=False))
                    await asyncio.wait({prompt, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    if not prompt.done():  # SIGTERM while waiting for input
                        prompt.cancel()
                        await asyncio.gather(prompt, return_exceptions=True)
                        return
                    line = prompt.result()
            except (EOFError, KeyboardInterrupt):
                return
            except _Interrupt as e:
                if not e.had_text and armed:
                    return
                armed = not e.had_text
                if armed:
                    self._print(QUIT_HINT)
                continue
            armed = False
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
        read = _BatchInput()
        try:
            while not stopping.done():
                wanted.release()
                getting = asyncio.ensure_future(lines.get())
                await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not getting.done():
                    getting.cancel()
                    return
                line = getting.result()
                message = read.end() if line is None else read.add(line.rstrip("\r\n"))
                if message is not None:
                    self._line, whole = message
                    if not await self._handle_until(self._line, stopping, grace,
                                                    message=whole):
                        return
                if line is None:
                    return
        finally:
            for notice in read.notices():
                with self.live.above():
                    self.stderr.write(f"gistbot: {notice}\n")
                    self.stderr.flush()

    async def _handle_until(self, line: str, stopping: asyncio.Future[Any], grace: float,
                            *, message: bool = False) -> bool:
        """``handle(line)``; once ``stopping``, it has ``grace`` seconds left to finish
        (none after SIGINT in batch mode). Ctrl-C cancels it (``interrupt``)."""
        handling = self._inflight = asyncio.ensure_future(self.handle(line, message=message))
        try:
            await asyncio.wait({handling, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not handling.done():
                wait = 0.0 if self._interrupted.is_set() else grace
                done, _ = await asyncio.wait({handling}, timeout=wait)
                if not done:
                    handling.cancel()
                    await asyncio.gather(handling, return_exceptions=True)
                    if not self._interrupted.is_set():
                        self._print(SHUTDOWN_APOLOGY, prefix="gistbot> ")
                    return False
        finally:
            self._inflight = None
        if handling.cancelled():  # Ctrl-C: the request is dropped, the chat goes on
            if self.interactive:
                self._print(CANCELLED)
            return not stopping.done()
        return handling.result() and not stopping.done()

    async def handle(self, line: str, *, message: bool = False) -> bool:
        """Act on one input line (``message``: a multi-line message, never a command);
        return False to stop."""
        command = "" if message else line.strip().lower()
        read = None if message else read_line(line, self.commands)
        if read is not None:  # a command's arguments are read before anything else is done
            name, args = read
            self._print(args.text if isinstance(args, Usage) else await self._command(name, args))
            return True
        if command in ("/quit", "/exit"):
            return False
        if command.startswith("/") and " " not in command:
            self._print(f"Unknown command {command}. {banner_help(self.commands)}")
        else:
            msg = IncomingMessage(self.key, f"console-{uuid.uuid4().hex}", self.user, self.user,
                                  line, time.time(), mentions_bot=True, is_direct=True)
            received = await self.service.receive(msg)
            if received.reply is not None:
                await self.flow.deliver(received.reply)
        return True

    async def _command(self, name: str, args: Any) -> str:
        """Run command ``name`` of the registry with its parsed ``args``; the operator at the
        terminal may reset, forget, manage digests and change every setting."""
        command = self.commands.get(name)
        assert command is not None  # read_line found it
        work = command.respond(ConsoleContext(self), args)
        result = await (self._busy(work) if command.waits else work)
        if name == "help" and not args.name:
            return f"{result.text}\n{QUIT}"
        return result.text

    async def _busy(self, work: Awaitable[T]) -> T:
        """Await ``work`` showing a spinner when interactive (nothing in batch mode)."""
        async with self.spinning():
            return await work

    @contextlib.asynccontextmanager
    async def spinning(self) -> AsyncIterator[None]:
        """A spinner meanwhile when interactive (nothing in batch mode)."""
        if not self.interactive:
            yield
            return
        spinner = asyncio.create_task(self._spin())
        try:
            yield
        finally:
            spinner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await spinner
            self.live.clear()

    async def _spin(self) -> None:
        for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
            self.live.show(self.stdout, f"{frame} thinking…")
            await asyncio.sleep(0.1)


class _BatchInput:
    """Batch mode's lines into messages: one a line; the lines between two :data:`FENCE`
    lines as one (blank lines kept); blank lines outside skipped and noted."""

    def __init__(self) -> None:
        self.number = 0  # lines read
        self.block: list[str] | None = None  # inside a fence: its lines so far
        self.opened = 0  # the line number of the open fence
        self.skipped: list[int] = []
        self.unclosed = 0  # the fence left open at the end of input, if any

    def add(self, line: str) -> tuple[str, bool] | None:
        """The message ``line`` completes, if any: (text, whether it is a whole message)."""
        self.number += 1
        if self.block is not None:
            if line.strip() != FENCE:
                self.block.append(line)
                return None
            return self._close()
        if line.strip() == FENCE:
            self.block, self.opened = [], self.number
            return None
        if not line.strip():
            self.skipped.append(self.number)
            return None
        return line, False

    def end(self) -> tuple[str, bool] | None:
        """End of input: a fence left open still sends what it holds (nothing is lost)."""
        if self.block is None:
            return None
        self.unclosed = self.opened
        return self._close()

    def _close(self) -> tuple[str, bool] | None:
        text = "\n".join(self.block or [])
        self.block = None
        if not text.strip():
            self.skipped.append(self.opened)
            return None
        return text, True

    def notices(self) -> list[str]:
        """What the person should know about their input, for stderr."""
        out = []
        if self.skipped:
            shown = ", ".join(map(str, self.skipped[:10])) + (", …" if len(self.skipped) > 10
                                                              else "")
            where = "line" if len(self.skipped) == 1 else "lines"
            out.append(f"skipped {plural(len(self.skipped), 'blank line')} ({where} {shown}): "
                       f"one message per line; put a message of several lines between two "
                       f"lines of {FENCE}")
        if self.unclosed:
            out.append(f"the {FENCE} of line {self.unclosed} was never closed; what followed "
                       "it was sent as one message")
        return out


class ConsoleContext:
    """A command at the terminal (``bot.commands.declare.Context``): the operator may do
    everything; there are no threads and no links."""

    def __init__(self, chat: ConsoleChat) -> None:
        self.features, self.commands = chat.features, chat.commands
        self.key, self.user_id, self.is_direct = chat.key, chat.user, False
        self.roles: tuple[str, ...] | None = None
        self.parent = ""
        self.locale = chat.locale

    async def user_name(self) -> str:
        return self.user_id

    def reader(self) -> Access:
        return OPEN

    def everyone(self) -> Access:
        return OPEN

    async def where(self) -> Where:
        return Where(self.key, locale=self.locale)

    async def may(self, permission: Permission) -> bool:
        return True

    def refusal(self, permission: Permission, action: str) -> str:
        return f"You may not {action}."

    def who(self, permission: Permission) -> str:
        if permission is Permission.EVERYONE:
            return "anyone"
        return "you (the operator at the terminal)"

    def readable(self, text: str) -> str:
        return text


class _Terminal:
    """The console's ``bot.conversation.reply_flow.ReplyOutlet``: a reply is printed whole, a
    spinner turns meanwhile; nothing can be edited or found again (nothing to answer late)."""

    placeholder = ""
    stream_interval: float | None = None

    def __init__(self, chat: ConsoleChat) -> None:
        self.chat = chat
        self._printed = itertools.count(1)

    async def post(self, post: Post) -> str | None:
        self.chat._print(post.text, prefix="gistbot> ")
        return str(next(self._printed))

    async def edit(self, post: Post, message_id: str) -> bool:
        return False

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        return True

    async def find(self, post: Post) -> str | None:
        return None

    def split(self, text: str) -> tuple[list[str], str]:
        return [text], ""

    def preview(self, text: str) -> str:
        return text

    async def whisper(self, msg: IncomingMessage, text: str) -> None:
        self.chat._print(text, prefix="gistbot> ")

    def working(self, key: ChannelKey) -> contextlib.AbstractAsyncContextManager[None]:
        return self.chat.spinning()


def read_line(line: str, commands: Registry = COMMANDS) -> tuple[str, Any] | None:
    """A command line's command name and arguments (a ``Usage`` when its parser can't read
    them); None for a line that is no command of the registry (a message, /quit)."""
    word, rest = ([*line.strip().split(None, 1), ""])[:2]
    command = commands.get(word) if word.startswith("/") else None
    return None if command is None else (command.name, command.spec.parse(rest))


async def _either(*events: asyncio.Event) -> None:
    """Return once any of ``events`` is set."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


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


async def serve(launch: Launch) -> int:
    """The terminal chat in ``launch.channel`` until ``/quit``, end of input or ``stop``;
    Ctrl-C belongs to the chat (cancel, clear, quit) while SIGTERM still stops."""
    chat = ConsoleChat(launch.features, channel=launch.channel, live=launch.live,
                       json_lines=launch.json_lines)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, chat.interrupt)
    return await chat.run(launch.banner, stop=launch.stop,
                          grace=reply_grace(launch.settings.restarts.shutdown_grace_seconds))


PLATFORM = Platform("console", serve, trusted=True)
