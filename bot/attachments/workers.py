"""``Extractor``: files are parsed in worker processes, never in the bot's own.

A hostile file (a PDF whose 200 pages share one 2 MB content stream, a decompression
bomb) can burn a CPU for minutes or fill memory. Parsed in the bot's process it held the
threads the event loop lends to blocking calls (host name lookups among them), so replies
stopped reaching the platform, and shutdown waited for the parser. Here each file goes to
one of ``ATTACHMENT_WORKERS`` long-lived worker processes (``bot.attachments.worker``),
started when the first file arrives: the worker has a CPU-time limit per file
(``ATTACHMENT_CPU_SECONDS``) and an address-space cap (``ATTACHMENT_MEMORY_MB``), and the
bot kills it at ``ATTACHMENT_TIMEOUT`` seconds of wall-clock time, when the task reading
the file is cancelled, and on ``close`` (shutdown); a killed worker is replaced by the next
file that needs one. The event loop only writes and reads pipes, so no thread is held.

Workers get only the environment variables starting Python needs, never the bot's tokens.

A pool rather than a process per file: starting a worker (interpreter, pypdf, Pillow)
costs about a third of a second of CPU, far more than reading a normal text file
(docs/decisions/0034).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import struct
import sys
from dataclasses import replace
from pathlib import Path

from bot.attachments.model import Reading
from bot.settings.sections import AttachmentSettings

__all__ = ["TOOK_TOO_LONG", "Extractor"]

log = logging.getLogger(__name__)
_LENGTH = struct.Struct(">I")
_KINDS = frozenset({"text", "image", "unreadable"})
_ROOT = str(Path(__file__).resolve().parent.parent.parent)  # where ``bot`` is importable
TOOK_TOO_LONG = "unreadable (took too long)"
_ENV = frozenset({"PATH", "PYTHONPATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR",
                  "VIRTUAL_ENV", "SYSTEMROOT"})


class _Died(Exception):
    """The worker ended (killed at a limit, or crashed) before it answered."""


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def ask(self, job: dict[str, object], data: bytes) -> dict[str, object]:
        """Send one file, read the answer; ``_Died`` if the process ends first."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        header = json.dumps(job).encode()
        try:
            stdin.write(_LENGTH.pack(len(header)) + header + _LENGTH.pack(len(data)))
            stdin.write(data)
            await stdin.drain()
            (size,) = _LENGTH.unpack(await stdout.readexactly(_LENGTH.size))
            answer = json.loads(await stdout.readexactly(size))
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as e:
            raise _Died(type(e).__name__) from e
        if not isinstance(answer, dict):
            raise _Died("not an answer")
        return answer

    def kill(self) -> None:
        """Kill the process now (its exit is awaited by ``reap``)."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    async def reap(self) -> int:
        """Wait for the process to end; its exit status."""
        return await self.proc.wait()


def _reading(answer: dict[str, object]) -> Reading:
    """A ``Reading`` from a worker's answer, checked field by field (it came from a process
    that parsed a stranger's file)."""
    kind = answer.get("kind")
    if kind not in _KINDS:
        return Reading("unreadable", reason="unreadable")

    def text(name: str) -> str:
        value = answer.get(name, "")
        return value if isinstance(value, str) else ""

    def number(name: str) -> int:
        value = answer.get(name, 0)
        return value if isinstance(value, int) and value >= 0 else 0

    return Reading("unreadable" if kind == "unreadable" else "text" if kind == "text"
                   else "image", text=text("text"), width=number("width"),
                   height=number("height"), mime=text("mime"), reason=text("reason"))


class Extractor:
    """Reads files in a pool of worker processes (see the module docstring)."""

    def __init__(self, limits: AttachmentSettings) -> None:
        self.limits = limits
        self._slots = asyncio.Semaphore(limits.attachment_workers)
        self._idle: list[_Worker] = []
        self._live: set[_Worker] = set()
        self._closed = False
        self.started = 0  # worker processes started, for tests and logs
        self.killed = 0  # worker processes killed at a limit

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers alive now."""
        return [w.proc.pid for w in self._live]

    async def read(self, data: bytes, declared: str) -> Reading:
        """What ``data`` is (``bot.attachments.extract``), read in a worker; an image's
        ``Reading`` carries ``data``. Never raises for what a file contains."""
        if self._closed:
            return Reading("unreadable", reason="not read: the bot is stopping")
        limits = self.limits
        job: dict[str, object] = {
            "declared": declared, "max_chars": limits.attachment_max_chars,
            "pages": limits.pdf_pages, "max_pixels": limits.max_pixels,
            "cpu": limits.attachment_cpu_seconds,
        }
        async with self._slots:
            worker = self._take_idle() or await self._spawn()
            if worker is None:
                return Reading("unreadable", reason="unreadable")
            done = False
            try:
                async with asyncio.timeout(limits.attachment_timeout):
                    answer = await worker.ask(job, data)
                done = True
            except TimeoutError:
                log.info("reading a file took over %s s: its worker is killed",
                         limits.attachment_timeout)
                return Reading("unreadable", reason=TOOK_TOO_LONG)
            except _Died:
                return await self._died(worker)
            finally:
                if done and not self._closed:
                    self._idle.append(worker)
                else:
                    await self._end(worker)
        if "error" in answer:
            log.error("a file worker failed on a file: %s", answer["error"])
        reading = _reading(answer)
        return replace(reading, data=data) if reading.kind == "image" else reading

    def _take_idle(self) -> _Worker | None:
        while self._idle:
            worker = self._idle.pop()
            if worker.proc.returncode is None:
                return worker
            self._live.discard(worker)
        return None

    async def _died(self, worker: _Worker) -> Reading:
        code = await worker.reap()
        if code == -signal.SIGXCPU:
            self.killed += 1
            log.info("reading a file used over %s CPU seconds: its worker was stopped",
                     self.limits.attachment_cpu_seconds)
            return Reading("unreadable", reason=TOOK_TOO_LONG)
        log.warning("a file worker ended with status %s while reading a file", code)
        return Reading("unreadable", reason="unreadable")

    async def _spawn(self) -> _Worker | None:
        # Only what starting Python needs: no token or key is within a parser's reach.
        env = {k: v for k, v in os.environ.items() if k in _ENV}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot.attachments.worker",
                str(self.limits.attachment_memory_mb), env=env,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL)
        except OSError as e:
            log.error("could not start a worker process to read files: %s", e)
            return None
        worker = _Worker(proc)
        self._live.add(worker)
        self.started += 1
        return worker

    async def _end(self, worker: _Worker) -> None:
        """Kill ``worker`` and wait for it (shielded: a cancelled reader still reaps it)."""
        if worker.proc.returncode is None:
            self.killed += 1
        worker.kill()
        self._live.discard(worker)
        await asyncio.shield(worker.reap())

    async def close(self) -> None:
        """Kill every worker (shutdown), whatever it is reading, and wait for them."""
        self._closed = True
        workers = list(self._live)
        self._idle.clear()
        self._live.clear()
        for worker in workers:
            worker.kill()
        await asyncio.gather(*(w.reap() for w in workers), return_exceptions=True)
