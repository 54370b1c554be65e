"""Storage faults that no retry fixes — disk full, read-only, a server that stays away —
classified once and reported once a minute per cause.

A full disk fails every write: a line per failed write would bury the log (and, on the
same disk, make it worse). ``FaultReport.failed`` logs the first failure of a cause at
ERROR, then at most one line a minute with the count of failures meanwhile;
``FaultReport.succeeded`` logs one line when writes work again. Both backends share one
report per process (``REPORT``), so the log says the same thing whichever is in use.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from memory.errors import StoreUnavailableError

__all__ = ["REPORT", "FaultReport", "unavailable"]

log = logging.getLogger("memory.stores")

INTERVAL = 60.0


class FaultReport:
    """Once-a-minute-per-cause reporting of ``StoreUnavailableError`` (thread-safe: the
    SQLite writer classifies in its worker thread)."""

    def __init__(self, interval: float = INTERVAL, clock: Callable[[], float] = time.monotonic):
        self.interval, self.clock = interval, clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}  # cause -> when it was last logged
        self._missed: dict[str, int] = {}  # cause -> failures since then

    def failed(self, err: StoreUnavailableError) -> None:
        """Count a failure of ``err.cause``; log it when the cause was quiet for a minute."""
        now = self.clock()
        with self._lock:
            last = self._last.get(err.cause)
            if last is not None and now - last < self.interval:
                self._missed[err.cause] = self._missed.get(err.cause, 0) + 1
                return
            missed = self._missed.pop(err.cause, 0)
            self._last[err.cause] = now
        more = f" ({missed} more writes failed the same way in the last minute)" if missed else ""
        log.error("%s; messages are not stored or acknowledged until this is fixed "
                  "(the platform delivers them again)%s", err, more)

    def succeeded(self) -> None:
        """A write committed: if a fault was being reported, say once that it is over."""
        if not self._last:
            return
        with self._lock:
            causes, self._last, self._missed = sorted(self._last), {}, {}
        if causes:
            log.warning("the database accepts writes again (after: %s)", ", ".join(causes))

    def reset(self) -> None:
        """Forget every cause without a word (a new run, or a test)."""
        with self._lock:
            self._last, self._missed = {}, {}

    @property
    def active(self) -> bool:
        """Whether a fault has been reported and no write has succeeded since."""
        return bool(self._last)


REPORT = FaultReport()


def unavailable(cause: str, exc: BaseException) -> StoreUnavailableError:
    """A ``StoreUnavailableError`` for ``cause`` with ``exc`` as its cause, reported."""
    err = StoreUnavailableError(cause, str(exc) or type(exc).__name__)
    err.__cause__ = exc
    REPORT.failed(err)
    return err
