"""Time phrases past ``bot.catchup.since``'s own grammar, read by dateparser: dates as people write
them (``3 dec``, ``march 3rd``, ``2/12``, ``12.02.2026``) and phrases such as ``noon
yesterday``, ``yesterday 5pm``, ``last week`` or ``3 months ago``.

dateparser is lenient: on its own it reads ``a`` or ``12`` as a day of this month. So it is
asked only for readings that name at least a day and a month (or are relative to now), only
English words are read, and the text is bounded (``MAX_CHARS``, ``MAX_WORDS``) before it
gets there; anything it raises counts as unreadable. Its import and first parse cost tens
to hundreds of milliseconds, so it is imported on the first phrase, not at start.

Numeric dates follow the reader's locale where the platform tells it (``en-US``: month
first; ``de``, ``en-GB``: day first; ``ja``, ``zh``, ``ko``: year first); without one,
slashes read month first and dots day first (``12.02.2026`` is 12 February everywhere
dots are used).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = ["MAX_CHARS", "MAX_WORDS", "date_order", "posix_locale", "wall_time"]

MAX_CHARS = 64
MAX_WORDS = 8
# Regions that write the month first; Japanese, Chinese, Korean, Hungarian and Lithuanian
# write the year first. Everyone else writes the day first.
_MONTH_FIRST = frozenset({"US", "PH", "FM", "MH", "PW", "AS", "GU", "MP", "PR", "UM", "VI"})
_YEAR_FIRST = frozenset({"ja", "zh", "ko", "hu", "lt", "mn"})
_LOCALE = re.compile(r"^([a-z]{2,3})(?:[-_]([A-Za-z]{2,4}))?(?:[-_]([A-Za-z]{2}|\d{3}))?",
                     re.ASCII)
_DOTTED = re.compile(r"\d\.\d", re.ASCII)
_SETTINGS: dict[str, Any] = {
    "PREFER_DATES_FROM": "past",  # "3 dec" on 1 December is last year's
    "RETURN_AS_TIMEZONE_AWARE": False,  # wall-clock time in the caller's zone
    "REQUIRE_PARTS": ["day", "month"],  # not "12" or "dec" alone as a day of this month
    "PREFER_DAY_OF_MONTH": "first",
}


def date_order(locale: str | None, text: str = "") -> str:
    """``DMY``, ``MDY`` or ``YMD`` for numeric dates in ``text`` written in ``locale``
    (a BCP 47 or POSIX name such as ``en-US``, ``de_DE.UTF-8``; None: unknown)."""
    m = _LOCALE.match((locale or "").strip())
    if m is None or m.group(1) in ("c", "posix"):
        return "DMY" if _DOTTED.search(text) else "MDY"
    language = m.group(1).lower()
    region = next((g.upper() for g in m.group(2, 3) if g and len(g) == 2), "")
    if language in _YEAR_FIRST:
        return "YMD"
    if region in _MONTH_FIRST or (language == "en" and not region):
        return "DMY" if _DOTTED.search(text) else "MDY"
    return "DMY"


def posix_locale(env: Mapping[str, str]) -> str | None:
    """The locale dates are written in on a terminal (``LC_ALL``, ``LC_TIME``, ``LANG``, in
    POSIX's order), or None for none or ``C``/``POSIX``."""
    for name in ("LC_ALL", "LC_TIME", "LANG"):
        value = env.get(name, "").strip()
        if value:
            return None if value.split(".")[0].upper() in ("C", "POSIX") else value
    return None


def readable(text: str) -> bool:
    """Whether ``text`` is short enough to hand to dateparser at all."""
    return 0 < len(text) <= MAX_CHARS and len(text.split()) <= MAX_WORDS


def wall_time(text: str, base: datetime, locale: str | None = None) -> datetime | None:
    """The naive wall-clock time ``text`` names, read at wall-clock time ``base`` (naive, in
    the caller's zone); None when dateparser cannot read it (or fails on it)."""
    if not readable(text):
        return None
    import dateparser  # lazily: see the module docstring

    settings = dict(_SETTINGS, RELATIVE_BASE=base, DATE_ORDER=date_order(locale, text))
    try:
        found = dateparser.parse(text, languages=["en"], settings=settings)
    except Exception:  # odd input dateparser trips on is just unreadable
        return None
    return found.replace(tzinfo=None) if isinstance(found, datetime) else None
