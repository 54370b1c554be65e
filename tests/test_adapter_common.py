"""What all adapters share: the error sentence, the live-reply pace, and a helpful
``ConfigError`` (naming the extra) when a platform library is not installed."""

from __future__ import annotations

import sys

import pytest

from adapters.discord import invite_url, run_discord
from adapters.replies import FAILED, user_text
from adapters.slack import run_slack
from bot.conversation.reply_flow import LiveThrottle
from bot.errors import ConfigError, LLMTimeout
from bot.settings import load_settings


def test_user_text_is_a_friendly_sentence_never_the_exception_text() -> None:
    assert user_text(LLMTimeout("upstream said: secret-ish detail")) == LLMTimeout.user_message
    assert user_text(RuntimeError("Traceback: token=xoxb-123")) == FAILED
    assert "xoxb" not in FAILED and "Traceback" not in FAILED


def test_live_throttle_shows_at_most_once_per_interval() -> None:
    now = [100.0]
    first = LiveThrottle(1.0, clock=lambda: now[0])
    assert first.due() and not first.due()  # the first delta at once, then wait
    now[0] += 0.5
    assert not first.due()
    now[0] += 0.5
    assert first.due()
    placeholder = LiveThrottle(1.0, clock=lambda: now[0], shown_now=True)
    assert not placeholder.due()  # something was just shown
    now[0] += 1.0
    assert placeholder.due()


def _without(monkeypatch: pytest.MonkeyPatch, *libraries: str) -> None:
    """Make ``libraries`` (and gistbot's modules that import them) unimportable here."""
    for name in list(sys.modules):
        top = name.split(".")[0]
        if top in libraries or name.startswith(("adapters.discord.", "adapters.slack.")):
            monkeypatch.delitem(sys.modules, name)
    for library in libraries:
        monkeypatch.setitem(sys.modules, library, None)


async def test_missing_discord_extra_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without(monkeypatch, "discord")
    with pytest.raises(ConfigError, match=r"pip install 'gistbot\[discord\]'"):
        invite_url(1)
    settings = load_settings({"DISCORD_TOKEN": "t"}, env_file=None)
    with pytest.raises(ConfigError, match=r"pip install 'gistbot\[discord\]'"):
        await run_discord(None, settings)  # type: ignore[arg-type]  # never reached


async def test_missing_slack_extra_is_a_config_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without(monkeypatch, "slack_bolt", "slack_sdk")
    settings = load_settings({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"},
                             env_file=None)
    with pytest.raises(ConfigError, match=r"pip install 'gistbot\[slack\]'"):
        await run_slack(None, settings)  # type: ignore[arg-type]  # never reached
