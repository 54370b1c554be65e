"""``/catchup``'s time phrases: what people type (``3 days ago``, ``last friday``, ``since
noon``, ``2/12`` in their locale …) resolved in the zone of the request, across a DST
change; future and unreadable phrases answered with examples; dateparser bounded, guarded
and imported only when a phrase needs it."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from bot.arguments import Usage
from bot.catchup import phrases
from bot.catchup.phrases import date_order, posix_locale
from bot.catchup.since import Ago, Phrase, SinceError, read_since, resolve_since
from bot.commands.registry import SPECS

BERLIN = ZoneInfo("Europe/Berlin")
UTC = ZoneInfo("UTC")
# Monday 30 March 2026, 12:00 in Berlin: the clocks went from CET to CEST on Sunday 29 March.
NOW = datetime(2026, 3, 30, 12, 0, tzinfo=BERLIN).timestamp()


def berlin(*args: int) -> float:
    return datetime(*args, tzinfo=BERLIN).timestamp()  # type: ignore[misc]


@pytest.mark.parametrize(("text", "start"), [
    ("3 days ago", NOW - 3 * 86400),  # exact hours, like 3d: 11:00 on Friday, in CET
    ("an hour ago", NOW - 3600),
    ("a day ago", NOW - 86400),
    ("1 day and 2 hours ago", NOW - 26 * 3600),
    ("last friday", berlin(2026, 3, 27)),
    ("last monday", berlin(2026, 3, 23)),  # the one before today
    ("monday", berlin(2026, 3, 30)),  # today included, as before
    ("since noon", berlin(2026, 3, 30, 12)),
    ("noon", berlin(2026, 3, 30, 12)),
    ("midnight", berlin(2026, 3, 30)),
    ("5pm", berlin(2026, 3, 29, 17)),  # still to come today: yesterday's
    ("since 9:30 am", berlin(2026, 3, 30, 9, 30)),
    ("noon yesterday", berlin(2026, 3, 29, 12)),
    ("yesterday 1am", berlin(2026, 3, 29, 1)),  # CET, before the change at 02:00
    ("3 dec", berlin(2025, 12, 3)),  # the latest 3 December
    ("march 3rd", berlin(2026, 3, 3)),
    ("12.02.2026", berlin(2026, 2, 12)),  # dots: day first
    ("Since Yesterday", berlin(2026, 3, 29)),
])
def test_phrases_resolve_in_the_zone_of_the_request(text: str, start: float) -> None:
    assert resolve_since(text, now=NOW, zone=BERLIN) == start


def test_a_wall_clock_phrase_crosses_the_dst_change_by_the_calendar() -> None:
    # noon Sunday (CEST) to noon Monday is 24 h; noon Saturday (CET) to noon Sunday only 23 h
    sunday = resolve_since("noon yesterday", now=NOW, zone=BERLIN)
    saturday = resolve_since("noon yesterday", now=NOW - 86400, zone=BERLIN)
    assert NOW - sunday == 86400 and sunday - saturday == 23 * 3600
    # the same words in UTC name another instant
    assert resolve_since("noon yesterday", now=NOW, zone=UTC) == sunday + 2 * 3600


def test_ago_phrases_are_our_exact_lengths_not_dateparser_readings() -> None:
    assert read_since("3 days ago") == Ago(3 * 86400) == read_since("3d")
    assert isinstance(read_since("3 dec"), Phrase)


@pytest.mark.parametrize(("locale", "start"), [
    ("en-US", berlin(2026, 2, 12)),  # month first
    (None, berlin(2026, 2, 12)),
    ("de", berlin(2025, 12, 2)),  # day first: the latest 2 December
    ("en-GB", berlin(2025, 12, 2)),
    ("de_DE.UTF-8", berlin(2025, 12, 2)),
])
def test_numeric_dates_follow_the_readers_locale(locale: str | None, start: float) -> None:
    assert resolve_since("2/12", now=NOW, zone=BERLIN, locale=locale) == start


def test_locale_names_give_a_date_order() -> None:
    assert [date_order(x) for x in ("en-US", "en_PH", "en-GB", "fr", "pt-BR", "ja", "zh-CN",
                                    "ko", None, "C.UTF-8")] == [
        "MDY", "MDY", "DMY", "DMY", "DMY", "YMD", "YMD", "YMD", "MDY", "MDY"]
    assert date_order(None, "12.02.2026") == date_order("en-US", "12.02.2026") == "DMY"
    assert posix_locale({"LANG": "de_DE.UTF-8", "LC_TIME": "en_GB.UTF-8"}) == "en_GB.UTF-8"
    assert posix_locale({"LC_ALL": "C.UTF-8", "LANG": "de_DE"}) is None
    assert posix_locale({}) is None


@pytest.mark.parametrize("text", ["tomorrow", "next friday", "in 3 days", "2027-01-01",
                                  "3 dec 2030"])
def test_future_phrases_say_a_catch_up_looks_back_with_examples(text: str) -> None:
    with pytest.raises(SinceError, match="in the future; a catch-up looks back: use 2h") as e:
        resolve_since(text, now=NOW, zone=BERLIN)
    assert "3 days ago" in str(e.value) and "last friday" in str(e.value)


@pytest.mark.parametrize("text", ["soon", "a", "12", "dec", "year 1", "whenever you like",
                                  "ago", "13pm", "0 days ago"])
def test_phrases_it_cannot_read_get_the_usage_with_examples(text: str) -> None:
    result = SPECS["catchup"].parse(text)
    assert isinstance(result, Usage), result
    assert "2h" in result.text and "3 days ago" in result.text and "2/12" in result.text


def test_long_text_never_reaches_dateparser(monkeypatch: pytest.MonkeyPatch) -> None:
    import dateparser

    seen: list[str] = []
    real = dateparser.parse
    monkeypatch.setattr(dateparser, "parse", lambda text, **kw: seen.append(text) or real(
        text, **kw))
    long_phrase = "on the third of december " * 3  # 75 characters
    many_words = "3 dec a b c d e f g"  # short, but nine words
    for text in (long_phrase, many_words):
        assert isinstance(SPECS["catchup"].parse(text), Usage)
    assert seen == []
    assert not isinstance(SPECS["catchup"].parse("3 dec"), Usage) and seen == ["3 dec"]


def test_dateparser_raising_is_a_usage_not_an_error(monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    import dateparser

    def broken(text: str, **kw: object) -> None:
        raise OverflowError("date value out of range")

    monkeypatch.setattr(dateparser, "parse", broken)
    result = SPECS["catchup"].parse("3 dec")
    assert isinstance(result, Usage) and "I can't read '3 dec'" in result.text
    assert [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")] == []
    assert phrases.wall_time("3 dec", datetime(2026, 3, 30, 12)) is None


@pytest.mark.slow
def test_dateparser_is_imported_by_the_first_phrase_not_at_start() -> None:
    code = ("import sys, time, bot.cli, bot.catchup.since\n"
            "assert 'dateparser' not in sys.modules\n"
            "bot.catchup.since.read_since('2h'); assert 'dateparser' not in sys.modules\n"
            "bot.catchup.since.read_since('3 dec'); assert 'dateparser' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
