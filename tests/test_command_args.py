"""Every command's argument parser (``bot.commands``) and each platform's translation of a
command payload into arguments: whatever the text, a typed result or a usage sentence —
never an exception, never an empty answer, nothing logged."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.console_adapter import read_line
from adapters.discord.commands import TEXT_OPTION, read_options
from adapters.slack.commands import COMMANDS, read_command
from bot.arguments import Usage
from bot.catchup.digests import describe
from bot.catchup.since import CatchupArgs, SinceError, read_since, start_of
from bot.catchup.text import when
from bot.channels.config_command import ConfigRequest
from bot.commands.digest import DIGEST, DigestRequest
from bot.commands.registry import SPECS
from bot.stores.digests import DigestSchedule
from memory.models import ChannelKey

NOW = datetime(2026, 3, 9, 15, 30, tzinfo=ZoneInfo("America/New_York")).timestamp()
UTC = ZoneInfo("UTC")
KEY = ChannelKey("test", "w", "c")
PIECES = [
    "2h", "90m", "1h30m", "0h", "yesterday", "today", "mon", "sunday", "public", "PUBLIC",
    "Europe/Berlin", "Mars/Phobos", "UTC", "America/Argentina", "Etc/GMT+14", "14:30", "25:99",
    "2026-03-08", "2026-03-08 14:30", "0001-01-01T00:00+14:00", "9999-12-31T23:59-14:00",
    "1969-12-31", "9999999999999h", "9" * 400 + "h", "9" * 5000 + "d", "１h", "９:００",
    "<https://acme.slack.com/archives/C1/p1773057600000200>",
    "https://discord.com/channels/1/2/" + "9" * 30, "https://discord.com/channels/@me/2/1",
    "daily", "weekly", "thread", "off", "now", "status", "09:00", "set", "unset", "server",
    "scope:server", "persona", "daily_tokens_per_user", "１０００", "model", "history", "usage",
    "#12", "１２", "\x00", "\x1b[2J", "\u202e", "\ud800", "\r\n", "日本語", "²", "",
]
TEXTS = st.one_of(
    st.text(),
    st.text(st.characters(codec=None, categories=("Cc", "Cs", "Nd", "Zs", "Po"))),
    st.lists(st.sampled_from(PIECES), max_size=5).map(" ".join),
    st.integers(1, 6000).map(lambda n: "9" * n + "h"),
    st.builds(lambda c, n: c * n, st.sampled_from(["x", "9", " ", "\x00", "９", "가"]),
              st.integers(9_000, 11_000)),
)
QUICK = settings(max_examples=200, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])


def answered(result: Any) -> None:
    """A parser's result is usable: a usage with words, or arguments that work."""
    if isinstance(result, Usage):
        assert result.text.strip()
    elif isinstance(result, CatchupArgs) and result.start is not None:
        zone = result.zone or UTC
        try:
            start = start_of(result.start, result.since, now=NOW, zone=zone)
        except SinceError as e:  # in the future: the service answers it
            assert str(e).strip()
        else:
            assert when(start, zone)
    elif isinstance(result, DigestRequest) and result.action in ("daily", "weekly"):
        s = DigestSchedule(KEY, result.action, result.weekday, result.minute,
                           result.zone or "UTC", NOW, "u", result.in_thread)
        assert describe(s, NOW)


@pytest.fixture
def quiet(caplog: pytest.LogCaptureFixture) -> Any:
    caplog.set_level(logging.DEBUG, logger="bot.commands")
    yield
    assert [r.getMessage() for r in caplog.records if r.name.startswith("bot.commands")] == []


@QUICK
@given(text=TEXTS)
def test_every_command_parser_answers_any_text(quiet: None, text: str) -> None:
    for spec in SPECS.values():
        answered(spec.parse(text))


@QUICK
@given(text=TEXTS, public=st.booleans())
def test_every_platform_translation_answers_any_text(quiet: None, text: str,
                                                     public: bool) -> None:
    for name in COMMANDS:
        args, _public = read_command(name, {"text": text, "team_id": "T", "channel_id": "C"})
        answered(args)
        read = read_line(f"{name} {text}")
        assert read is not None and read[0] == name.removeprefix("/")
        answered(read[1])
    for name, option in TEXT_OPTION.items():
        answered(read_options(name, {option: text, "public": public}))
    answered(read_options("summary", {"public": public}))
    for fields in ({"key": text}, {"key": "persona", "value": text},
                   {"key": "daily_tokens_per_user", "value": text}, {"action": text}):
        answered(read_options("config", {"action": "set", **fields}))


@pytest.mark.parametrize(("text", "says"), [
    ("9999999999999h", "more than 100 years"),
    ("9" * 150 + "h", "more than 100 years"),
    ("9" * 4400 + "h", "too long"),
    ("0001-01-01T00:00+14:00", "from 1970 on"),
    ("9999-12-31T23:59-14:00", "from 1970 on"),
    ("yesterday Mars/Phobos", "I don't know the time zone 'Mars/Phobos'"),
    ("yesterday America/Argentina", "I don't know the time zone"),
    ("１h", "digits 0-9"),
    ("https://discord.com/channels/1/2/" + "9" * 30, "I can't read"),
    ("2h\x00", "control characters"),
    ("x" * 10_000, "too long"),
])
def test_catchup_text_it_cannot_read_gets_a_usage_sentence(text: str, says: str) -> None:
    result = SPECS["catchup"].parse(text)
    assert isinstance(result, Usage) and says in result.text


@pytest.mark.parametrize("text", ["daily ９:００", "daily 0９:00", "weekly mon ０9:00",
                                  "daily 09:00 Mars/Phobos", "daily\x0009:00"])
def test_digest_text_it_cannot_read_gets_a_usage_sentence(text: str) -> None:
    assert isinstance(DIGEST.parse(text), Usage)


def test_valid_text_reads_as_before() -> None:
    args = SPECS["catchup"].parse("yesterday Europe/Berlin public")
    assert isinstance(args, CatchupArgs) and args.public and args.since == "yesterday"
    assert read_since("1h30m").start(NOW, UTC) == NOW - 5400
    assert DIGEST.parse("weekly Mon 08:30 Asia/Seoul thread") == DigestRequest(
        "weekly", 0, 510, "Asia/Seoul", True)
    assert SPECS["config"].parse("set server model gpt-big") == ConfigRequest(
        "set", "model", "gpt-big", True)
    persona = SPECS["config"].parse("set persona 答えは１２３文字以内")
    assert isinstance(persona, ConfigRequest) and persona.value == "答えは１２３文字以内"
    assert isinstance(SPECS["config"].parse("set daily_tokens_per_user １０００"), Usage)
    assert SPECS["remember"].parse("会議は３時から").text == "会議は３時から"  # type: ignore[union-attr]
    assert read_command("/summary", {"text": "  PUBLIC "})[1] is True
    assert read_command("/digest", {"text": "now"})[1] is True
    assert read_options("catchup", {"since": "2h", "public": True}).public
