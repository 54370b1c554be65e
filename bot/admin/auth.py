"""The inspector's login: one shared ``ADMIN_TOKEN``, server-side sessions, CSRF tokens.

The token is compared in constant time (``hmac.compare_digest``) and never rendered; a
login gives a random session id in a cookie that is ``HttpOnly`` (no script reads it) and
``SameSite=Strict`` (no other site's page sends it). Every change is a POST that must carry
the session's CSRF token, also compared in constant time. Sessions live in this process
only and expire; a restart logs everyone out. Failed logins are limited per address.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["COOKIE", "Session", "Sessions"]

COOKIE = "gistbot_admin"
SESSION_SECONDS = 8 * 3600
MAX_SESSIONS = 1000
FAILURES_PER_MINUTE = 10


@dataclass
class Session:
    """One logged-in browser: its CSRF token, where it logged in from, one pending notice."""

    csrf: str
    address: str
    expires: float
    notice: str = ""


@dataclass
class Sessions:
    """Login checks and the live sessions."""

    token: str
    clock: Callable[[], float] = time.monotonic
    _live: dict[str, Session] = field(default_factory=dict)
    _failures: dict[str, list[float]] = field(default_factory=dict)

    def throttled(self, address: str) -> bool:
        """Whether ``address`` failed too many logins in the last minute."""
        now = self.clock()
        recent = [t for t in self._failures.get(address, []) if t > now - 60]
        self._failures[address] = recent
        if len(self._failures) > 10_000:
            self._failures = {a: ts for a, ts in self._failures.items() if ts}
        return len(recent) >= FAILURES_PER_MINUTE

    def login(self, offered: str, address: str) -> str | None:
        """A new session id if ``offered`` is the token; None (and a counted failure) if not."""
        if not hmac.compare_digest(offered.encode(), self.token.encode()):
            self._failures.setdefault(address, []).append(self.clock())
            return None
        self._expire()
        sid = secrets.token_urlsafe(32)
        self._live[sid] = Session(secrets.token_urlsafe(32), address,
                                  self.clock() + SESSION_SECONDS)
        while len(self._live) > MAX_SESSIONS:
            self._live.pop(next(iter(self._live)))
        return sid

    def get(self, sid: str | None) -> Session | None:
        """The live session with this id, or None."""
        if not sid:
            return None
        session = self._live.get(sid)
        if session is None or session.expires < self.clock():
            self._live.pop(sid, None)
            return None
        return session

    def logout(self, sid: str | None) -> None:
        """End a session."""
        if sid:
            self._live.pop(sid, None)

    @staticmethod
    def csrf_ok(session: Session, offered: str | None) -> bool:
        """Whether ``offered`` is the session's CSRF token (constant time)."""
        return bool(offered) and hmac.compare_digest(str(offered).encode(),
                                                     session.csrf.encode())

    def _expire(self) -> None:
        now = self.clock()
        for sid in [s for s, v in self._live.items() if v.expires < now]:
            del self._live[sid]
