"""Logging set-up: secret scrubbing, one-line errors, and a terminal shared with the console.

Every configured token and key is replaced by ``***`` in every log record, whatever logger
or exception text carried it, so a stack trace from an SDK can never leak a credential.

A failure a person can cause or meet (the model endpoint or the platform unreachable, a
rejected token, an unwritable database, a rejected summary: ``GistbotError``,
``memory.errors``, network and SDK errors) is logged as one line naming it; its traceback
is printed only at ``LOG_LEVEL=DEBUG``. An unexpected exception (a bug) keeps its
traceback, except in the console chat, where the terminal is the conversation: there every
record is one line unless ``--verbose`` (a bug's traceback) or ``LOG_LEVEL=DEBUG`` (every
traceback).

The console chat draws a spinner on the terminal line it is waiting on. Records are written
above it (:class:`LiveLine`): the line is cleared, the record written, the spinner drawn
again, so neither overwrites the other. In console mode the level is WARNING unless
``--verbose`` (or ``LOG_LEVEL=DEBUG``), so a chat shows no ``INFO`` line at all.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TextIO

from bot.errors import GistbotError
from memory.errors import MemoryError_

__all__ = [
    "LiveLine",
    "OneLineFormatter",
    "SecretFilter",
    "TerminalHandler",
    "is_expected_failure",
    "scrub",
    "setup_logging",
]

# Loggers whose INFO lines are per request chatter (openai 3.x logs through ``httpx2``).
NOISY = ("httpx", "httpx2", "httpcore", "openai", "discord.gateway", "aiosqlite",
         "slack_bolt", "slack_sdk.socket_mode")
# Packages whose exceptions are network or service failures, not bugs in gistbot.
_EXPECTED_PACKAGES = frozenset({
    "aiohttp", "discord", "slack_sdk", "slack_bolt", "httpx", "httpx2", "httpcore", "openai",
    "websockets", "ssl", "asyncpg", "sqlite3", "aiosqlite",
})
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret (six characters or longer) replaced by ``***``."""
    for secret in secrets:
        if len(secret) >= 6:
            text = text.replace(secret, "***")
    return text


def is_expected_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure of the world (network, credentials, disk, a service)
    rather than a bug: such failures are logged as one line below DEBUG."""
    # MemoryError_: the store failed, or the model's summary was rejected or preempted.
    if isinstance(exc, GistbotError | MemoryError_ | OSError | TimeoutError):
        return True
    return type(exc).__module__.partition(".")[0] in _EXPECTED_PACKAGES


def one_line(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class SecretFilter(logging.Filter):
    """Replaces each secret in the formatted message (and exception text) with ``***``."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if len(s) >= 6]

    def _scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        record.msg = self._scrub(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._scrub(record.exc_text)
        return True


class OneLineFormatter(logging.Formatter):
    """Formats an expected failure's record as one line (the exception's type and message
    appended) unless ``tracebacks``; an unexpected one too when not ``bug_tracebacks`` (the
    console chat), with a hint where its traceback is. Scrubs secrets either way."""

    def __init__(self, fmt: str, *, tracebacks: bool, secrets: Sequence[str] = (),
                 bug_tracebacks: bool = True) -> None:
        super().__init__(fmt)
        self.tracebacks = tracebacks
        self.bug_tracebacks = bug_tracebacks or tracebacks
        self.secrets = [s for s in secrets if len(s) >= 6]

    def format(self, record: logging.LogRecord) -> str:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None or self.tracebacks:
            return scrub(super().format(record), self.secrets)
        expected = is_expected_failure(exc)
        if not expected and self.bug_tracebacks:
            return scrub(super().format(record), self.secrets)
        short = logging.makeLogRecord(record.__dict__)
        short.exc_info, short.exc_text, short.stack_info = None, None, None
        text = super().format(short)
        detail = one_line(exc)
        if str(exc).strip() and " ".join(str(exc).split()) in text:
            detail = ""  # the message already says it
        if not expected:
            detail = f"{detail}; --verbose shows the traceback" if detail else \
                "--verbose shows the traceback"
        return scrub(f"{text} ({detail})" if detail else text, self.secrets)


class LiveLine:
    """A terminal line redrawn in place (the console's spinner).

    ``above()`` lets a writer put whole lines above it: the line is cleared first and drawn
    again after, under a lock, so a log record never lands in the middle of the spinner.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._stream: TextIO | None = None
        self._text = ""

    def show(self, stream: TextIO, text: str) -> None:
        """Draw ``text`` on ``stream``'s current line (replacing what the line showed)."""
        with self._lock:
            self._stream, self._text = stream, text
            stream.write(f"\r\x1b[K{text}")
            stream.flush()

    def clear(self) -> None:
        """Erase the line and stop redrawing it."""
        with self._lock:
            if self._stream is not None and self._text:
                self._stream.write("\r\x1b[K")
                self._stream.flush()
            self._text = ""

    @contextlib.contextmanager
    def above(self) -> Iterator[None]:
        """Write whole lines inside this block; they appear above the live line."""
        with self._lock:
            stream, text = self._stream, self._text
            if stream is not None and text:
                stream.write("\r\x1b[K")
                stream.flush()
            try:
                yield
            finally:
                if stream is not None and text:
                    stream.write(text)
                    stream.flush()


class TerminalHandler(logging.Handler):
    """Writes records to ``stream`` (default: whatever ``sys.stderr`` is at the time, so a
    prompt library that redirects it while reading a line prints records above its prompt),
    above the ``live`` line."""

    def __init__(self, live: LiveLine, stream: TextIO | None = None) -> None:
        super().__init__()
        self.live = live
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            stream = self.stream or sys.stderr
            with self.live.above():
                stream.write(text + "\n")
                stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)


def setup_logging(
    level: str, secrets: Sequence[str] = (), *, console: bool = False, verbose: bool = False,
    fmt: str = "text",
) -> LiveLine:
    """Log to stderr with secrets scrubbed; return the live line the console draws on.

    ``console``: the terminal is a chat, so only WARNING and above are shown, each on one
    line, unless ``verbose`` (INFO, and a bug's traceback) or ``level`` is DEBUG. Tracebacks
    of expected failures only at DEBUG.
    ``fmt="json"`` writes one JSON object per line (``bot.ops.json_logs``).
    """
    live = LiveLine()
    handler = TerminalHandler(live)
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    if console and not verbose and numeric > logging.DEBUG:
        numeric = max(numeric, logging.WARNING)
    handler.setFormatter(
        OneLineFormatter(FORMAT, tracebacks=numeric <= logging.DEBUG, secrets=secrets,
                         bug_tracebacks=verbose or not console)
    )
    if fmt == "json":
        from bot.ops.json_logs import JsonFormatter

        handler.setFormatter(JsonFormatter())
    handler.addFilter(SecretFilter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, numeric))
    # discord.py warns at every start that voice needs PyNaCl/davey; gistbot has no voice.
    logging.getLogger("discord.client").addFilter(_NoVoiceWarning())
    logging.captureWarnings(True)
    return live


class _NoVoiceWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "voice will NOT be supported" not in record.getMessage()
