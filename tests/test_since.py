"""Reading ``since`` and ``/catchup`` words: lengths, calendar words in a zone, DST, ISO,
message links, errors."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from bot.catchup.since import SinceError, parse_catchup_args, resolve_since, time_of_link
from bot.settings.zones import UnknownZone, parse_zone

NY = ZoneInfo("America/New_York")
SEOUL = ZoneInfo("Asia/Seoul")
UTC = ZoneInfo("UTC")


def ts(*args: int, zone: ZoneInfo = UTC) -> float:
    return datetime(*args, tzinfo=zone).timestamp()  # type: ignore[misc]


NOW = ts(2026, 3, 9, 15, 30, zone=NY)  # Monday after the US spring-forward (8 March 2026)


@pytest.mark.parametrize(("text", "seconds"), [
    ("2h", 7200), ("90m", 5400), ("1d", 86400), ("1w", 7 * 86400), ("1h30m", 5400),
    ("45 min", 2700), ("3 hours", 10800),
])
def test_lengths_are_exact_seconds(text: str, seconds: int) -> None:
    assert NOW - resolve_since(text, now=NOW, zone=NY) == seconds


def test_yesterday_follows_the_calendar_across_dst() -> None:
    # Sunday 8 March 2026 had 23 hours in New York: midnight Sunday → midnight Monday.
    start = resolve_since("yesterday", now=NOW, zone=NY)
    assert start == ts(2026, 3, 8, 0, 0, zone=NY) == ts(2026, 3, 8, 5, 0)
    today = resolve_since("today", now=NOW, zone=NY)
    assert today - start == 23 * 3600
    assert today == ts(2026, 3, 9, 4, 0)  # EDT is UTC-4 now
    # the same instant in Seoul is already Tuesday 05:30: yesterday is Monday there
    assert resolve_since("yesterday", now=NOW, zone=SEOUL) == ts(2026, 3, 9, zone=SEOUL)


def test_weekday_is_the_most_recent_one_today_included() -> None:
    assert resolve_since("monday", now=NOW, zone=NY) == ts(2026, 3, 9, zone=NY)
    assert resolve_since("sun", now=NOW, zone=NY) == ts(2026, 3, 8, zone=NY)
    assert resolve_since("tuesday", now=NOW, zone=NY) == ts(2026, 3, 3, zone=NY)  # EST then


def test_iso_dates_and_times_are_local_unless_they_carry_an_offset() -> None:
    assert resolve_since("2026-03-07", now=NOW, zone=NY) == ts(2026, 3, 7, zone=NY)
    assert resolve_since("2026-03-09 09:15", now=NOW, zone=NY) == ts(2026, 3, 9, 9, 15, zone=NY)
    assert resolve_since("2026-03-09T09:15+09:00", now=NOW, zone=NY) == ts(
        2026, 3, 9, 9, 15, zone=SEOUL)
    assert resolve_since("14:00", now=NOW, zone=NY) == ts(2026, 3, 9, 14, 0, zone=NY)
    assert resolve_since("16:00", now=NOW, zone=NY) == ts(2026, 3, 8, 16, 0, zone=NY)  # not yet


def test_message_links_carry_their_own_time() -> None:
    discord_id = ((int(ts(2026, 3, 9, 12) * 1000) - 1_420_070_400_000) << 22) | 12345
    link = f"https://discord.com/channels/1/2/{discord_id}"
    assert resolve_since(link, now=NOW, zone=NY) == ts(2026, 3, 9, 12)
    ptb = f"https://ptb.discord.com/channels/@me/2/{discord_id}"
    assert time_of_link(ptb) == ts(2026, 3, 9, 12)
    slack = "https://acme.slack.com/archives/C0123/p1773057600000200"
    assert resolve_since(slack, now=NOW, zone=NY) == 1773057600.0002
    assert time_of_link("https://example.com/x") is None


def test_catchup_words_zone_and_public() -> None:
    args = parse_catchup_args("yesterday Europe/Berlin public")
    assert (args.since, args.public, args.zone and args.zone.key) == (
        "yesterday", True, "Europe/Berlin")
    slack = parse_catchup_args("<https://acme.slack.com/archives/C1/p1773057600000200>")
    assert slack.since.startswith("https://") and slack.zone is None and not slack.public
    assert parse_catchup_args("").since == ""
    assert parse_zone("utc").key == "UTC"


@pytest.mark.parametrize("text", ["soon", "0h", "2026-13-40", "25:00", "5x", "2027-01-01",
                                  "tomorrow"])
def test_unreadable_or_future_since_says_what_is_accepted(text: str) -> None:
    with pytest.raises(SinceError, match="2h, 90m, 1d"):
        resolve_since(text, now=NOW, zone=NY)


def test_unknown_zone_is_named() -> None:
    with pytest.raises(UnknownZone, match="Mars/Olympus"):
        parse_catchup_args("2h Mars/Olympus")
