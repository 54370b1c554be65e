"""Relative dates in a recalled message, resolved against the day it was said.

"My car got towed last Tuesday", recalled weeks later, means a day the reader can no longer
work out: the message's own date is in its day heading, but counting back to "last
Tuesday" is left to the model. ``dated`` appends the absolute dates a recalled line's
relative ones mean (``(last Tuesday = 14 May)``, the year only when it is not the year of
the day heading above), after the text, which stays as said.
Only unambiguous past references: "yesterday", "the day before yesterday", "N days ago",
"a week ago", "two weeks ago", "last <weekday>" (the most recent one before the day),
"last weekend" (the Saturday before), and Korean 어제, 그저께/그제, "N일 전". A bare
"on Monday" may be next Monday and is left alone. Dates are UTC, like the day headings.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

__all__ = ["dated", "resolve"]

_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a couple of": 2}
_PHRASE = re.compile(
    r"\b(?:the day before yesterday|yesterday|(?:\d|two|three|four|five|six|a couple of) "
    r"days ago|a week ago|two weeks ago|last weekend|last (?:" + "|".join(_DAYS) + r"))\b"
    r"|그저께|그제|어제|\d+일 전", re.IGNORECASE)


def resolve(phrase: str, said_on: date) -> date | None:
    """The day ``phrase`` (one ``_PHRASE`` match) means when said on ``said_on``."""
    p = phrase.casefold()
    back: int | None = None
    if p == "yesterday" or p == "어제":
        back = 1
    elif p in ("the day before yesterday", "그저께", "그제"):
        back = 2
    elif p == "a week ago":
        back = 7
    elif p == "two weeks ago":
        back = 14
    elif p.endswith("days ago"):
        n = p.removesuffix(" days ago")
        back = int(n) if n.isdigit() else _NUMBERS.get(n)
    elif p.endswith("일 전"):
        back = int(p.removesuffix("일 전"))
    elif p == "last weekend":
        back = (said_on.weekday() - 5) % 7 or 7
    elif p.startswith("last "):
        back = (said_on.weekday() - _DAYS.index(p.removeprefix("last "))) % 7 or 7
    return None if back is None else said_on - timedelta(days=back)


def dated(text: str, sent_at: float) -> str:
    """`` (last Tuesday = 14 May)`` for the relative dates in ``text`` (said at
    ``sent_at``, unix seconds), each once, in order; "" when it holds none."""
    if not (_relative(text) if len(text) <= _CACHED_CHARS else _PHRASE.search(text)):
        return ""
    return _dated(text, int(sent_at // 86400))


_CACHED_CHARS = 2000


_ASCII_WORDS = ("yesterday", "ago", "last")
"""A word every English phrase of ``_PHRASE`` holds (lower-cased)."""


@lru_cache(maxsize=4096)
def _relative(text: str) -> bool:
    """Whether ``text`` holds a relative date: remembered, since each recalled line asks it
    (a view weighs ~450 candidates, the next mostly the same, and the prompt renders the
    shown ones again) and the pattern's search costs ~10 microseconds a line. An ASCII
    text without one of ``_ASCII_WORDS`` is answered without it (~0.5 microseconds): in
    a very long channel the candidates are new lines each view, so the cache rarely
    helps (docs/decisions/0055). Only ASCII: ``IGNORECASE`` also matches non-ASCII
    letters (``ſ`` for ``s``) that ``lower`` leaves alone."""
    if text.isascii():
        low = text.lower()
        if not any(w in low for w in _ASCII_WORDS):
            return False
    return _PHRASE.search(text) is not None


@lru_cache(maxsize=1024)
def _dated(text: str, day: int) -> str:
    said_on = datetime.fromtimestamp(day * 86400, UTC).date()
    parts: dict[str, None] = {}
    for m in _PHRASE.finditer(text):
        d = resolve(m.group(), said_on)
        if d is not None:
            year = f" {d.year}" if d.year != said_on.year else ""  # the heading has it
            parts[f"{m.group()} = {d.day} {d:%b}{year}"] = None
    return f" ({'; '.join(parts)})" if parts else ""
