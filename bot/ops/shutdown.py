"""Graceful shutdown: SIGTERM and SIGINT stop intake, let replies in flight finish within
``SHUTDOWN_GRACE_SECONDS``, and the process exits 0; a second SIGINT (Ctrl-C) meanwhile
exits at once with status 130.

Real signal handlers (``loop.add_signal_handler``), because as PID 1 in a container the
kernel applies no default action: a Python process without a handler ignores SIGTERM and
``docker stop`` ends in SIGKILL. (The image also runs under ``tini``.)

The grace period is split so everything fits in it: replies in flight get
:func:`reply_grace`; a reply that cannot finish by then is cancelled, its "thinking…"
placeholder replaced by :data:`SHUTDOWN_APOLOGY`, and its debt released so it is answered
after the restart (``bot.missed.owed``); running compactions then get :func:`compaction_grace` to
commit (a cancelled one commits nothing); then the LLM client and the store close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import NoReturn

__all__ = [
    "SHUTDOWN_APOLOGY",
    "compaction_grace",
    "force_exit",
    "install_stop_signals",
    "reply_grace",
]

log = logging.getLogger(__name__)
INTERRUPTED = 128 + signal.SIGINT  # the status a shell reports for Ctrl-C

SHUTDOWN_APOLOGY = (
    "Sorry, I'm restarting and couldn't finish this answer. I'll answer it when I'm back "
    "in a moment; if nothing comes, please ask again."
)


def compaction_grace(grace: float) -> float:
    """Seconds closing lets running compactions commit: a quarter of the grace, at most 5."""
    return min(5.0, grace / 4)


def reply_grace(grace: float) -> float:
    """Seconds replies in flight get to finish: the grace less the compactions' share and
    time (a fifth, at most 2 s) to post apologies, close, and let the interpreter exit
    (about 0.7 s on a busy 2-core machine, after ``main`` returned)."""
    return max(0.0, grace - compaction_grace(grace) - min(2.0, grace / 5))


def force_exit() -> NoReturn:
    """A second Ctrl-C while stopping: the person at the terminal will not wait for the
    drain. Exit at once with 130 (interrupted), as a shell reports it. Nothing is lost that
    a SIGKILL would not lose: every message is stored before it is answered, and a reply
    owed is answered after the restart."""
    log.warning("SIGINT again: exiting now, without waiting for replies in flight")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(INTERRUPTED)


def install_stop_signals(stop: asyncio.Event) -> list[signal.Signals]:
    """Set ``stop`` on SIGTERM or SIGINT (logged once each); returns the signals handled.
    A second SIGINT while stopping exits at once with status 130 (:func:`force_exit`).

    Where the loop cannot take signal handlers (not the main thread), nothing is installed
    and the caller keeps Python's defaults.
    """
    loop = asyncio.get_running_loop()
    installed = []

    def stopping(sig: signal.Signals) -> None:
        if stop.is_set() and sig == signal.SIGINT:
            force_exit()
        if not stop.is_set():
            log.info("%s: stopping — no new events; replies in flight may finish (Ctrl-C "
                     "again: exit at once)", sig.name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stopping, sig)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append(sig)
    return installed
