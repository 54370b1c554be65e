"""Checks shared by the reliability and security tests (bad input, faults, soak, isolation,
abuse): no live Slack ping in output, and the log records that say something."""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest

from adapters.slack.text import WORD_JOINER

__all__ = ["LIVE_SLACK_PING", "assert_no_slack_ping", "records"]

# What Slack would turn into a notification: a broadcast or user/group control sequence, or a
# bare @here/@channel/@everyone not defused by a WORD JOINER.
LIVE_SLACK_PING = re.compile(
    r"<!(?:here|channel|everyone|group|subteam)|<@[UWB]|(?<![\w@])@(?:here|channel|everyone)\b",
    re.IGNORECASE,
)


def assert_no_slack_ping(texts: Iterable[str]) -> None:
    """Fail if any text Slack would show could notify someone."""
    for text in texts:
        m = LIVE_SLACK_PING.search(text)
        assert m is None, f"live ping {m.group(0)!r} in {text[:200]!r}"
        assert WORD_JOINER not in text or "@" in text  # the defused form keeps its '@'


def records(caplog: pytest.LogCaptureFixture, level: int, *needles: str) -> list[str]:
    """Messages (with exception text) at ``level`` or above that contain every needle."""
    out = []
    for r in caplog.records:
        if r.levelno < level:
            continue
        text = r.getMessage() + ("\n" + r.exc_text if r.exc_text else "")
        if all(n in text for n in needles):
            out.append(text)
    return out
