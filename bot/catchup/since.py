"""Reading ``/catchup [since]`` and ``/digest`` times: the words people type, in their time zone.

``since`` is one of:

* a length back from now: ``2h``, ``90m``, ``1d``, ``1h30m``, ``3 days ago`` (exact seconds);
* a calendar word in the zone: ``today``, ``yesterday``, a weekday (the most recent one,
  today included; ``last friday``: before today), from local midnight (23 or 25 h over DST);
* an ISO date, date and time (without an offset: local time) or a time of day (``14:30``,
  ``5pm``, ``noon``: today, or yesterday when that is still to come);
* any other phrase dateparser reads (``bot.catchup.phrases``: ``3 dec``, ``2/12`` in the reader's
  locale), after our rules, so the forms above keep their exact meaning;
* a Discord or Slack message link: from that message on (the time is in the link).

A trailing IANA zone name or ``UTC`` picks the zone, else ``TIMEZONE``; a leading
``since`` is ignored; ``public`` anywhere asks for a public answer. Anything else is a
``SinceError`` saying what is accepted.

``read_since`` turns the words into one of the small values below (a length at most 100
years, a date in 1970-9998); ``start_of`` finds its start at a time in a zone, so only "in
the future" is refused there. A new phrase is a grammar rule returning one of these values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.arguments import ArgumentError
from bot.catchup.phrases import wall_time
from bot.settings.zones import parse_zone

__all__ = [
    "ACCEPTED",
    "Ago",
    "CatchupArgs",
    "ClockTime",
    "DaysBack",
    "Instant",
    "LocalDate",
    "LocalDateTime",
    "Phrase",
    "Since",
    "SinceError",
    "Weekday",
    "local_midnight",
    "parse_catchup_args",
    "read_since",
    "resolve_since",
    "start_of",
    "time_of_link",
]

ACCEPTED = (
    "use 2h, 90m, 1d, 3 days ago, an hour ago, today, yesterday, a weekday (monday, "
    "last friday), a time (14:30, 5pm, noon), a date (3 dec, 2/12, 2026-03-08 14:30) or a "
    "message link, optionally followed by a time zone such as Europe/Berlin"
)
DISCORD_EPOCH_MS = 1_420_070_400_000
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MAX_BACK = 100 * 366 * 86400  # a length reaches at most about a century back
YEARS = (1970, 9998)  # dates outside cannot be turned into times in every zone
_UNITS = {"m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
          "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
          "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
# ASCII digits only (re.ASCII): "\d" alone also matches full-width and other digits.
_LENGTH = re.compile(r"^(?:(\d+)\s*([a-z]+)\s*)+$", re.ASCII)
_PART = re.compile(r"(\d+)\s*([a-z]+)", re.ASCII)
_DISCORD = re.compile(
    r"https?://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/channels/(@me|\d{1,20})/(\d{1,20})/"
    r"(\d{1,20})(?!\d)", re.ASCII)
_SLACK = re.compile(r"https?://[\w.-]+\.slack\.com/archives/([A-Z0-9]+)/p(\d{10})(\d{6})(?!\d)",
                    re.ASCII)
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$", re.ASCII)
_CLOCK12 = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?$", re.ASCII)
_NAMED_TIMES = {"noon": (12, 0), "midday": (12, 0), "midnight": (0, 0)}
_SINCE = re.compile(r"^since\s+", re.IGNORECASE)
_ONE = re.compile(r"\b(?:an?|one)\b", re.ASCII)
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ][\d:.,+-]+Z?)?$", re.ASCII)


class SinceError(ArgumentError):
    """A ``since`` gistbot cannot read; the message is for the user (a zone it cannot find
    is ``bot.settings.zones.UnknownZone``)."""


# ---------------------------------------------------------------- what a ``since`` means
# Each reading is a small value whose ``start(now, zone)`` is plain arithmetic that stays
# inside the years datetime can show: the bounds are checked when the text is read.


@dataclass(frozen=True, slots=True)
class Instant:
    """A fixed moment (a message link, an ISO time with an offset)."""

    at: float

    def start(self, now: float, zone: ZoneInfo) -> float:
        """The moment itself."""
        return self.at


@dataclass(frozen=True, slots=True)
class Ago:
    """A length back from now, in exact seconds (``2h``, ``1h30m``)."""

    seconds: int

    def start(self, now: float, zone: ZoneInfo) -> float:
        """``seconds`` before ``now``."""
        return now - self.seconds


@dataclass(frozen=True, slots=True)
class DaysBack:
    """Local midnight ``days`` calendar days ago (``today`` 0, ``yesterday`` 1)."""

    days: int

    def start(self, now: float, zone: ZoneInfo) -> float:
        """That day's 00:00 in ``zone``."""
        return local_midnight(_local(now, zone).date() - timedelta(days=self.days), zone)


@dataclass(frozen=True, slots=True)
class Weekday:
    """The most recent such weekday (0 = Monday), today included unless ``before_today``
    (``last friday``), from local midnight."""

    index: int
    before_today: bool = False

    def start(self, now: float, zone: ZoneInfo) -> float:
        """Midnight of the most recent such day in ``zone``."""
        today = _local(now, zone).date()
        back = (today.weekday() - self.index) % 7 or (7 if self.before_today else 0)
        return local_midnight(today - timedelta(days=back), zone)


@dataclass(frozen=True, slots=True)
class ClockTime:
    """A time of day: today, or yesterday when it is still to come."""

    hour: int
    minute: int

    def start(self, now: float, zone: ZoneInfo) -> float:
        """The latest such local time not after ``now``."""
        today = _local(now, zone).date()
        at = datetime.combine(today, time(self.hour, self.minute), tzinfo=zone).timestamp()
        if at > now:
            yesterday = today - timedelta(days=1)
            at = datetime.combine(yesterday, time(self.hour, self.minute), tzinfo=zone).timestamp()
        return at


@dataclass(frozen=True, slots=True)
class LocalDate:
    """A calendar date: its local midnight."""

    day: date

    def start(self, now: float, zone: ZoneInfo) -> float:
        """``day``'s 00:00 in ``zone``."""
        return local_midnight(self.day, zone)


@dataclass(frozen=True, slots=True)
class LocalDateTime:
    """A date and time without an offset: local time in the zone."""

    at: datetime

    def start(self, now: float, zone: ZoneInfo) -> float:
        """That wall-clock time in ``zone``."""
        return self.at.replace(tzinfo=zone).timestamp()


@dataclass(frozen=True, slots=True)
class Phrase:
    """Words dateparser reads (``bot.catchup.phrases``), resolved at ``now`` as wall-clock time in
    the zone, numeric dates in the order of the reader's ``locale``."""

    text: str

    def start(self, now: float, zone: ZoneInfo, locale: str | None = None) -> float:
        """The moment the phrase names; ``SinceError`` when it names none in range."""
        found = wall_time(self.text, _local(now, zone).replace(tzinfo=None), locale)
        if found is None:
            raise SinceError(f"I can't read {_shown(self.text)} as a time; " + ACCEPTED)
        if not YEARS[0] <= found.year <= YEARS[1]:
            raise SinceError(f"{_shown(self.text)} is out of range: use a date from "
                             f"{YEARS[0]} on; " + ACCEPTED)
        return found.replace(tzinfo=zone).timestamp()


Since = Instant | Ago | DaysBack | Weekday | ClockTime | LocalDate | LocalDateTime | Phrase


@dataclass(frozen=True, slots=True)
class CatchupArgs:
    """``/catchup``'s words: the ``since`` text (empty: the default) and its reading, the
    zone, ``public``."""

    since: str
    zone: ZoneInfo | None
    public: bool
    start: Since | None = None


def _looks_like_zone(word: str) -> bool:
    return word.upper() in ("UTC", "GMT") or bool(re.fullmatch(r"[A-Za-z_]+/[\w/+-]+", word))


def parse_catchup_args(text: str) -> CatchupArgs:
    """Split ``/catchup`` text into the ``since`` words, a trailing zone and ``public``, and
    read the ``since``; ``SinceError`` for what cannot be read."""
    words = [w.strip("<>") for w in text.split()]
    public = any(w.lower() == "public" for w in words)
    words = [w for w in words if w.lower() != "public"]
    zone = None
    if words and _looks_like_zone(words[-1]):
        zone = parse_zone(words.pop())
    since = _SINCE.sub("", " ".join(words))
    return CatchupArgs(since, zone, public, read_since(since) if since else None)


def local_midnight(day: date, zone: ZoneInfo) -> float:
    """Unix time of ``day``'s 00:00 in ``zone`` (DST-aware)."""
    return datetime.combine(day, time(0), tzinfo=zone).timestamp()


def _local(now: float, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(now, UTC).astimezone(zone)


def time_of_link(text: str) -> float | None:
    """The send time a Discord or Slack message link encodes; None if ``text`` is no link."""
    m = _DISCORD.search(text)
    if m:
        return ((int(m.group(3)) >> 22) + DISCORD_EPOCH_MS) / 1000
    m = _SLACK.search(text)
    if m:
        return float(f"{m.group(2)}.{m.group(3)}")
    return None


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 60 else raw[:60] + "…")


def _length(text: str, raw: str) -> Ago | None:
    if not _LENGTH.match(text):
        return None
    total = 0
    for amount, unit in _PART.findall(text):
        if unit not in _UNITS:
            return None
        if len(amount) > 9:  # no int() of a digit run past anything meaningful
            total = MAX_BACK + 1
            break
        total += int(amount) * _UNITS[unit]
    if total <= 0:
        raise SinceError("A period of zero length has nothing to catch up on; " + ACCEPTED)
    if total > MAX_BACK:
        raise SinceError(f"{_shown(raw)} reaches back more than 100 years; " + ACCEPTED)
    return Ago(total)


def _weekday(word: str) -> int | None:
    if len(word) < 3:
        return None
    for i, name in enumerate(WEEKDAYS):
        if name.startswith(word):
            return i
    return None


def _iso(text: str) -> Instant | LocalDate | LocalDateTime | None:
    if not _ISO.match(text):
        return None
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            parsed = None
        else:
            parsed = datetime.fromisoformat(text.replace(" ", "T", 1))
            day = parsed.date()
    except ValueError:
        return None
    if not YEARS[0] <= day.year <= YEARS[1]:
        raise SinceError(f"{_shown(text)} is out of range: use a date from {YEARS[0]} on; "
                         + ACCEPTED)
    if parsed is None:
        return LocalDate(day)
    if parsed.tzinfo is None:
        return LocalDateTime(parsed)
    return Instant(parsed.timestamp())


def _ago(word: str, raw: str) -> Ago | None:
    """``3 days ago``, ``an hour ago``, ``1 day and 2 hours ago``: a length in words."""
    if not word.endswith(" ago"):
        return None
    body = _ONE.sub("1", word.removesuffix(" ago")).replace(" and ", " ").replace(",", " ")
    return _length(body.replace(" ", ""), raw)


def _clock(word: str, raw: str) -> ClockTime | None:
    """``14:30``, ``5pm``, ``5:30 pm``, ``noon``, ``midnight``."""
    if word in _NAMED_TIMES:
        return ClockTime(*_NAMED_TIMES[word])
    if m := _CLOCK.match(word):
        hour, minute = int(m.group(1)), int(m.group(2))
    elif m := _CLOCK12.match(word):
        hour, minute = int(m.group(1)), int(m.group(2) or 0)
        if not 1 <= hour <= 12:
            raise SinceError(f"{_shown(raw)} is not a time of day; " + ACCEPTED)
        hour = hour % 12 + (12 if m.group(3) == "p" else 0)
    else:
        return None
    if hour > 23 or minute > 59:
        raise SinceError(f"{_shown(raw)} is not a time of day; " + ACCEPTED)
    return ClockTime(hour, minute)


def _calendar(word: str) -> DaysBack | Weekday | None:
    if word == "today":
        return DaysBack(0)
    if word == "yesterday":
        return DaysBack(1)
    if (day := _weekday(word)) is not None:
        return Weekday(day)
    last, _, name = word.partition(" ")
    if last == "last" and (day := _weekday(name.strip())) is not None:
        return Weekday(day, before_today=True)
    return None


def read_since(text: str) -> Since:
    """What ``text`` means (see the module docstring); ``SinceError`` when unreadable."""
    raw = _SINCE.sub("", text.strip())
    word = " ".join(raw.lower().split())
    if (at := time_of_link(raw)) is not None:
        return Instant(at)
    if (length := _length(word.replace(" ", ""), raw)) is not None:
        return length
    if (length := _ago(word, raw)) is not None:
        return length
    if (day := _calendar(word)) is not None:
        return day
    if (clock := _clock(word, raw)) is not None:
        return clock
    if (iso := _iso(raw)) is not None:
        return iso
    if word.startswith("next ") or word == "tomorrow":
        raise SinceError(f"{_shown(raw)} is in the future; a catch-up looks back: " + ACCEPTED)
    phrase = Phrase(word)
    phrase.start(datetime.now(UTC).timestamp(), ZoneInfo("UTC"))  # SinceError: unreadable
    return phrase


def start_of(since: Since, text: str, *, now: float, zone: ZoneInfo,
             locale: str | None = None) -> float:
    """The unix time ``since`` (read from ``text``) means at ``now`` in ``zone``, numeric
    dates in ``locale``'s order; ``SinceError`` when it is in the future."""
    start = since.start(now, zone, locale) if isinstance(since, Phrase) else since.start(now, zone)
    if start > now:
        raise SinceError(f"{_shown(text.strip())} is in the future; a catch-up looks back: "
                         + ACCEPTED)
    return start


def resolve_since(text: str, *, now: float, zone: ZoneInfo, locale: str | None = None) -> float:
    """The unix time ``text`` means at ``now`` in ``zone``; ``SinceError`` when unreadable
    or in the future."""
    return start_of(read_since(text), text, now=now, zone=zone, locale=locale)
