"""How many of a channel's turns hold a term, remembered between searches (SQLite).

A turn search picks its terms by rarity, so it first counts, per query term, the turns in
the searched rowid range that hold it, up to ``turn_search.COMMON_DOCS + 1``: a short
doclist for a rare term, up to 5,001 rowids for a common one, ~60 terms per reply. In a
very long channel that was most of the recall's time, and common words recur from
message to message, so their counts are kept (docs/decisions/0003):

* only counts of at least ``MIN_KEPT``: a rare term is cheap to count and its exact count
  matters (a stale 0 could hide the one turn that holds an identifier);
* reused while the channel has grown by at most an eighth of the count (at most
  ``MAX_AGE`` seconds): counts only rank terms, which a few newer turns do not change;
* keyed by channel, cap and term; ``MAX_ENTRIES`` at most, least recently used dropped.

One instance per store; searches run on the reader's thread, ``clear`` on the event loop's,
hence the lock (held for dictionary operations only, never while counting).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["MAX_AGE", "MAX_ENTRIES", "MIN_KEPT", "TermCounts"]

MIN_KEPT = 64
"""Counts below this are never reused (cheap to count, and exactness matters there)."""
MAX_ENTRIES = 50_000
MAX_AGE = 300.0
"""Seconds a kept count may be reused at most, however little the channel grew."""

_Key = tuple[int, int, str]


class TermCounts:
    """An LRU of (channel id, cap, term) -> (count, searched seq, when counted)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._kept: OrderedDict[_Key, tuple[int, int, float]] = OrderedDict()
        self._clock = clock
        self._lock = threading.Lock()
        self.counted = 0
        """Counts computed (for tests and benchmarks: reuse shows as fewer)."""

    def get(self, cid: int, cap: int, term: str, high_seq: int,
            count: Callable[[str], int]) -> int:
        """The number of the channel's turns up to ``high_seq`` holding ``term`` (capped at
        ``cap``), from ``count(term)`` or a kept count that is still close enough."""
        key = (cid, cap, term)
        now = self._clock()
        with self._lock:
            kept = self._kept.pop(key, None)
            if kept is not None:
                n, seq, at = kept
                if 0 <= high_seq - seq <= n // 8 and now - at <= MAX_AGE:
                    self._kept[key] = kept  # most recently used again
                    return n
        n = count(term)
        with self._lock:
            self.counted += 1
            if n >= MIN_KEPT:
                self._kept[key] = (n, high_seq, now)
                if len(self._kept) > MAX_ENTRIES:
                    self._kept.popitem(last=False)
        return n

    def clear(self) -> None:
        """Forget every kept count (``/reset`` makes a channel's stale at once)."""
        with self._lock:
            self._kept.clear()
