"""A message through the path an adapter takes: ``ChatService.receive``, then a
``ReplyFlow`` (placeholder, streaming, outbox, settling) into an outlet that keeps what was
posted, and the reply read back from it (``benchmarks.delivered``, which the benchmarks use
too, so both drive the path production takes the same way).

``await ask(rt, msg)`` is the answer ``msg`` got (None: nothing was posted), as a person
would have seen it: the posted text, ``failed`` for a notice (its outbox id says so),
``private`` for a whisper (the quota notice).
"""

from __future__ import annotations

from benchmarks.delivered import Collected
from benchmarks.delivered import answer as ask

__all__ = ["Collected", "ask"]
