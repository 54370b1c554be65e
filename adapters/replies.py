"""What every adapter shares about answering: the user's text for an error, and the pace
of a streamed ("live") reply.

An adapter catches at its edge and logs with the stack; the user reads ``user_text``: a
short sentence from the ``bot.errors`` tree, never an exception's text.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.errors import GistbotError

__all__ = ["FAILED", "LiveThrottle", "user_text"]

FAILED = GistbotError.user_message  # for anything that is not a GistbotError


def user_text(error: BaseException) -> str:
    """The friendly sentence for ``error`` (its own for a ``GistbotError``)."""
    return error.user_message if isinstance(error, GistbotError) else FAILED


class LiveThrottle:
    """Lets a streamed reply be shown at most once per ``interval`` seconds.

    ``last`` is when it was last shown: ``-inf`` shows the first delta at once (Discord
    sends the reply then); ``clock()`` waits one interval first (Slack has just posted a
    placeholder).
    """

    def __init__(self, interval: float, *, clock: Callable[[], float] = time.monotonic,
                 shown_now: bool = False) -> None:
        self.interval, self.clock = interval, clock
        self.last = clock() if shown_now else float("-inf")

    def due(self) -> bool:
        """True (and the time is taken) when the reply may be shown again now."""
        now = self.clock()
        if now - self.last < self.interval:
            return False
        self.last = now
        return True
