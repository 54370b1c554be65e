"""Every child process a test starts is reaped, pass, fail or time out.

Each test's own code kills and waits what it starts (in a ``finally`` or a fixture's
teardown); this is the net under it, for the paths where that code never gets to run — a
timeout raised inside a blocking read, an event loop closed with the task that would have
waited still pending. ``tests/conftest.py`` wires it:

- the pytest process becomes a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``), so a
  grandchild whose parent died (``unshare … python``, a shell's background job) is
  reparented to the test process instead of to init, where nobody would find it;
- after each test, the test process's children that were not there before it started
  are killed with everything under them and waited (a zombie is only waited); a live one
  is reported as a warning, since the test should have ended it itself;
- at the end of the session (in an xdist worker, or a run without workers) whatever is
  left is killed and waited the same way.

``ended`` and ``ended_sync`` are that ``finally`` for a test's own processes.

Children that existed before a test began (a browser a session fixture started) are left
alone, and so are their own children: only the test process's direct children are
looked at.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

import psutil

__all__ = ["become_subreaper", "children", "ended", "ended_sync", "reap"]

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux only; False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def children() -> dict[int, float]:
    """This process's direct children: pid → start time (a pid can be reused)."""
    found: dict[int, float] = {}
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            found[child.pid] = child.create_time()
    return found


def reap(before: dict[int, float], within: float = 10.0) -> list[str]:
    """Kill (SIGKILL, with their descendants) and wait this process's children that are not
    in ``before``; return a description of each that was still running."""
    left: list[psutil.Process] = []
    for pid, started in children().items():
        if before.get(pid) != started:
            with contextlib.suppress(psutil.Error):
                left.append(psutil.Process(pid))
    running: list[str] = []
    doomed: list[psutil.Process] = []
    for proc in left:
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE:
                running.append(f"pid {proc.pid}: {' '.join(proc.cmdline())[:200]}")
            doomed += [*proc.children(recursive=True), proc]
    for proc in doomed:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    pending = set(doomed)
    deadline = time.monotonic() + within
    while pending and time.monotonic() < deadline:
        for proc in list(pending):
            if _gone(proc):
                pending.discard(proc)
        if pending:  # wait for an exit, briefly, then wait the zombies again
            psutil.wait_procs(list(pending), timeout=0.05)
    running += [f"pid {p.pid}: would not die" for p in pending]
    return running


def _gone(proc: psutil.Process) -> bool:
    """Whether ``proc`` has ended: waited here if it is (now) this process's child — its
    parent may have died first and left it to this subreaper — or a zombie of another
    parent, whose to wait."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(proc.pid, os.WNOHANG)
    try:
        return proc.status() == psutil.STATUS_ZOMBIE and proc.ppid() != os.getpid()
    except psutil.NoSuchProcess:
        return True


async def ended(*procs: asyncio.subprocess.Process) -> None:
    """Kill each of ``procs`` that still runs, and wait for all of them: the ``finally`` of
    a test that started them."""
    for proc in procs:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    for proc in procs:
        await proc.wait()


def ended_sync(proc: subprocess.Popen[bytes]) -> None:
    """``ended`` for a ``subprocess.Popen``; its pipes are closed too."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
