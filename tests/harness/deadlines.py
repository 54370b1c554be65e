"""How long a test may wait on this machine: every limit scales by one factor.

A limit in a test (pytest-timeout's per-test timeout, a harness wait for a log line, a
child's exit or a fake's request) is there to turn a hang into a failure, not to measure
speed; on a busy machine everything takes longer, and a limit sized for an idle one fails
tests that are right. ``FACTOR`` is ``GISTBOT_TEST_DEADLINE_FACTOR`` when set (say ``3``
on a slow CI runner), else one plus the 1-minute load average per core when the session
started (about 1 idle, about 2 with one CPU-bound process per core beside the suite),
at most ``MAX_FACTOR``. A thing that never happens still fails, only later.
"""

from __future__ import annotations

import os

__all__ = ["ENV", "FACTOR", "MAX_FACTOR", "factor", "scaled"]

ENV = "GISTBOT_TEST_DEADLINE_FACTOR"
MAX_FACTOR = 5.0


def factor(environ: os._Environ[str] | dict[str, str] = os.environ) -> float:
    """The factor: the environment's, or from the machine's load (see the module docstring)."""
    given = environ.get(ENV, "").strip()
    if given:
        value = float(given)
        if not value > 0:
            raise ValueError(f"{ENV} must be a positive number, not {given!r}")
        return value
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        return 1.0
    return min(MAX_FACTOR, 1.0 + max(0.0, load))


FACTOR = factor()


def scaled(seconds: float) -> float:
    """``seconds`` of an idle machine, on this one."""
    return seconds * FACTOR
