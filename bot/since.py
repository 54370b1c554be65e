"""Reading ``/catchup [since]`` and ``/digest`` times: the words people type, in their time zone.

``since`` is one of:

* a length back from now: ``2h``, ``90m``, ``1d``, ``1w``, ``1h30m`` (exact seconds, so
  ``1d`` is 24 hours even across a DST change);
* a calendar word in the zone: ``today``, ``yesterday``, a weekday (``monday``, ``mon``:
  the most recent one, today included), each from local midnight — so ``yesterday`` in
  New York on the day after the clocks change spans 23 or 25 hours, as the calendar says;
* an ISO date (``2026-03-08``: local midnight), date and time (``2026-03-08 14:30``,
  ``2026-03-08T14:30:00+09:00``; without an offset it is local time) or a time of day
  (``14:30``: today, or yesterday when that is still to come);
* a message link (Discord ``…/channels/<guild>/<channel>/<message>``, Slack
  ``…/archives/<channel>/p<ts>``): from that message on. Its time is in the link itself
  (Discord ids are timestamps, Slack ids are times), so it needs no lookup.

A trailing IANA zone name (``yesterday Europe/Berlin``, ``09:00 Asia/Seoul``) or ``UTC``
picks the zone; otherwise the configured ``TIMEZONE``. ``public`` anywhere asks for a
public answer. Anything else is a ``SinceError`` whose message says what is accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "ACCEPTED",
    "CatchupArgs",
    "SinceError",
    "local_midnight",
    "parse_catchup_args",
    "parse_zone",
    "resolve_since",
    "time_of_link",
]

ACCEPTED = (
    "use 2h, 90m, 1d, today, yesterday, a weekday (monday), an ISO date or time "
    "(2026-03-08, 2026-03-08 14:30, 14:30) or a message link, optionally followed by a time "
    "zone such as Europe/Berlin"
)
DISCORD_EPOCH_MS = 1_420_070_400_000
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_UNITS = {"m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
          "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
          "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_LENGTH = re.compile(r"^(?:(\d+)\s*([a-z]+)\s*)+$")
_PART = re.compile(r"(\d+)\s*([a-z]+)")
_DISCORD = re.compile(
    r"https?://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/channels/(@me|\d+)/(\d+)/(\d+)")
_SLACK = re.compile(r"https?://[\w.-]+\.slack\.com/archives/([A-Z0-9]+)/p(\d{10})(\d{6})")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$")


class SinceError(ValueError):
    """A ``since`` (or zone) gistbot cannot read; the message is for the user."""


@dataclass(frozen=True, slots=True)
class CatchupArgs:
    """``/catchup``'s words: the ``since`` text (empty: the default), the zone, ``public``."""

    since: str
    zone: ZoneInfo | None
    public: bool


def parse_zone(name: str) -> ZoneInfo:
    """An IANA zone (``Europe/Berlin``, ``UTC``); ``SinceError`` naming it otherwise."""
    try:
        if name.upper() in ("UTC", "GMT", "Z"):
            return ZoneInfo("UTC")
        if not re.fullmatch(r"[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)+", name):
            raise ZoneInfoNotFoundError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise SinceError(f"I don't know the time zone {name!r}; use an IANA name such as "
                         "Europe/Berlin, America/New_York or Asia/Seoul") from None


def _looks_like_zone(word: str) -> bool:
    return word.upper() in ("UTC", "GMT") or bool(re.fullmatch(r"[A-Za-z_]+/[\w/+-]+", word))


def parse_catchup_args(text: str) -> CatchupArgs:
    """Split ``/catchup`` text into the ``since`` words, a trailing zone and ``public``."""
    words = [w.strip("<>") for w in text.split()]
    public = any(w.lower() == "public" for w in words)
    words = [w for w in words if w.lower() != "public"]
    zone = None
    if words and _looks_like_zone(words[-1]):
        zone = parse_zone(words.pop())
    return CatchupArgs(" ".join(words), zone, public)


def local_midnight(day: date, zone: ZoneInfo) -> float:
    """Unix time of ``day``'s 00:00 in ``zone`` (DST-aware)."""
    return datetime.combine(day, time(0), tzinfo=zone).timestamp()


def time_of_link(text: str) -> float | None:
    """The send time a Discord or Slack message link encodes; None if ``text`` is no link."""
    m = _DISCORD.search(text)
    if m:
        return ((int(m.group(3)) >> 22) + DISCORD_EPOCH_MS) / 1000
    m = _SLACK.search(text)
    if m:
        return float(f"{m.group(2)}.{m.group(3)}")
    return None


def _length(text: str) -> float | None:
    if not _LENGTH.match(text):
        return None
    total = 0
    for amount, unit in _PART.findall(text):
        if unit not in _UNITS:
            return None
        total += int(amount) * _UNITS[unit]
    return float(total)


def _weekday(word: str) -> int | None:
    if len(word) < 3:
        return None
    for i, name in enumerate(WEEKDAYS):
        if name.startswith(word):
            return i
    return None


def _iso(text: str, zone: ZoneInfo) -> float | None:
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return local_midnight(date.fromisoformat(text), zone)
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone)
    return parsed.timestamp()


def resolve_since(text: str, *, now: float, zone: ZoneInfo) -> float:
    """The unix time ``text`` means at ``now`` in ``zone``; ``SinceError`` when unreadable
    or in the future."""
    raw = text.strip()
    word = raw.lower()
    local_now = datetime.fromtimestamp(now, UTC).astimezone(zone)
    start: float | None
    if (start := time_of_link(raw)) is not None:
        pass
    elif (length := _length(word.replace(" ", ""))) is not None:
        if length <= 0:
            raise SinceError("A period of zero length has nothing to catch up on; " + ACCEPTED)
        start = now - length
    elif word == "today":
        start = local_midnight(local_now.date(), zone)
    elif word == "yesterday":
        start = local_midnight(local_now.date() - timedelta(days=1), zone)
    elif (day := _weekday(word)) is not None:
        back = (local_now.weekday() - day) % 7
        start = local_midnight(local_now.date() - timedelta(days=back), zone)
    elif m := _CLOCK.match(word):
        hour, minute = int(m.group(1)), int(m.group(2))
        if hour > 23 or minute > 59:
            raise SinceError(f"{raw!r} is not a time of day; " + ACCEPTED)
        at = datetime.combine(local_now.date(), time(hour, minute), tzinfo=zone)
        if at.timestamp() > now:
            at = datetime.combine(local_now.date() - timedelta(days=1), time(hour, minute),
                                  tzinfo=zone)
        start = at.timestamp()
    elif (start := _iso(raw, zone)) is None:
        raise SinceError(f"I can't read {raw!r} as a time; " + ACCEPTED)
    if start > now:
        raise SinceError(f"{raw!r} is in the future; " + ACCEPTED)
    return start
