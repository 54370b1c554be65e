"""Replies per person per minute (``USER_RATE_LIMIT``), kept in the process.

A sliding one-minute window per ``(platform, author id)``. A person over the limit is told
once per window (``first_telling``); their messages are still recorded, only not answered.
A trusted platform (the operator's own terminal) is never limited. Idle people are forgotten
once more than 10,000 are tracked, so the map stays small.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from bot.installed import is_trusted

__all__ = ["RATE_WINDOW", "RateLimiter"]

RATE_WINDOW = 60.0  # seconds
_MAX_TRACKED = 10_000


class RateLimiter:
    """``limit`` replies a minute per person (0 = no limit), counted with ``clock``."""

    def __init__(self, limit: int, clock: Callable[[], float]) -> None:
        self.limit = limit
        self.clock = clock
        self._recent: dict[tuple[str, str], deque[float]] = {}
        self._told: set[tuple[str, str]] = set()

    def allow(self, platform: str, author_id: str) -> bool:
        """Count a reply for the author; False when that is over the limit."""
        if self.limit <= 0 or is_trusted(platform):  # the operator at their own terminal
            return True
        who = (platform, author_id)
        now = self.clock()
        recent = self._recent.setdefault(who, deque())
        while recent and recent[0] <= now - RATE_WINDOW:
            recent.popleft()
        if not recent:
            self._told.discard(who)
        if len(recent) >= self.limit:
            return False
        recent.append(now)
        if len(self._recent) > _MAX_TRACKED:  # forget idle people
            for key in [k for k, q in self._recent.items() if not q or q[-1] <= now - RATE_WINDOW]:
                del self._recent[key]
                self._told.discard(key)
        return True

    def first_telling(self, platform: str, author_id: str) -> bool:
        """True the first time in the window that this person is told they are over."""
        who = (platform, author_id)
        if who in self._told:
            return False
        self._told.add(who)
        return True
