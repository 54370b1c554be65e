"""The worker process that parses files (``python -m bot.attachments.worker MEMORY_MIB``).

It runs ``bot.attachments.extract`` on one file at a time, sent by the bot over stdin, and
answers over stdout. Before each file it sets its CPU-time limit (``RLIMIT_CPU``) to what
it has used plus ``cpu`` seconds, so a file that would burn the CPU ends with SIGXCPU; its
address space (``RLIMIT_AS``) is capped once at start, so a file that would need more
memory fails with ``MemoryError`` (then it is unreadable) instead of growing the machine's.
The bot kills it at the wall-clock limit and whenever it shuts down; on Linux the worker
also dies with the bot (``PR_SET_PDEATHSIG``).

Frames on both pipes are a 4-byte big-endian length and that many bytes. A request is a
JSON frame (``declared``, ``max_chars``, ``pages``, ``max_pixels``, ``cpu``) and a frame
of the file's bytes; the answer is a JSON frame of the ``Reading``'s fields (no bytes), so
the bot never unpickles anything a parser touched.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import resource
import signal
import struct
import sys
from typing import BinaryIO

__all__ = ["read_frame", "write_frame"]

_LENGTH = struct.Struct(">I")
_PR_SET_PDEATHSIG = 1


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame from ``stream``; None at its end."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    body = stream.read(size)
    return body if len(body) == size else None


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    """One frame to ``stream``, flushed."""
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


def _die_with_parent() -> None:
    """Ask Linux to kill this process when the bot dies, however it dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the CPU limit still ends a runaway file
        return
    if os.getppid() == 1:  # the bot died before the request took effect
        os._exit(0)


def _cpu_limit(seconds: int) -> None:
    """Let the next file use ``seconds`` more CPU seconds than this process has used."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(used.ru_utime + used.ru_stime) + seconds
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _answer(job: dict[str, object], data: bytes) -> dict[str, object]:
    from bot.attachments.extract import extract

    try:
        r = extract(data, str(job.get("declared", "")), max_chars=int(str(job["max_chars"])),
                    pages=int(str(job["pages"])), max_pixels=int(str(job["max_pixels"])))
    except MemoryError:
        return {"kind": "unreadable", "reason": "unreadable (too large to read)"}
    except Exception as e:  # a bug, not a file's fault: said to the bot, which logs it
        return {"kind": "unreadable", "reason": "unreadable", "error": type(e).__name__}
    return {"kind": r.kind, "text": r.text, "width": r.width, "height": r.height,
            "mime": r.mime, "reason": r.reason}


def main(argv: list[str]) -> int:
    """Serve requests until stdin ends."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the bot decides when this ends
    out = os.fdopen(os.dup(1), "wb")  # frames only: whatever a library prints goes elsewhere
    os.dup2(2, 1)
    memory = int(argv[1]) << 20 if len(argv) > 1 else resource.RLIM_INFINITY
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    import pypdf  # noqa: F401  (the parsers, loaded once per worker)

    import bot.attachments.extract  # noqa: F401

    stdin = sys.stdin.buffer
    while (header := read_frame(stdin)) is not None:
        data = read_frame(stdin)
        if data is None:
            return 0
        job = json.loads(header)
        _cpu_limit(int(job["cpu"]))
        write_frame(out, json.dumps(_answer(job, data), ensure_ascii=False).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
