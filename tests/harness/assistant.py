"""Slack assistant-thread events as Slack sends them (``assistant_thread_started``,
``assistant_thread_context_changed``, a person's message in the thread), for the Slack
harness (``tests/harness/slack.py``)."""

from __future__ import annotations

from typing import Any

from memory.models import ChannelKey
from tests.harness.slack import TEAM, mention

__all__ = ["DM", "DM_KEY", "THREAD", "asked", "context_changed", "started"]

DM = "D1"  # the person's direct-message conversation with the bot, where threads live
THREAD = "1729999327.187299"
DM_KEY = ChannelKey("slack", TEAM, DM)


def started(channel: str = "C1", *, user: str = "U1") -> dict[str, Any]:
    """``assistant_thread_started``: the person opened the assistant beside ``channel``."""
    return {"type": "assistant_thread_started", "event_ts": "1729999327.187300",
            "assistant_thread": {"user_id": user, "channel_id": DM, "thread_ts": THREAD,
                                 "context": {"channel_id": channel, "team_id": TEAM,
                                             "enterprise_id": None}}}


def context_changed(channel: str, *, user: str = "U1") -> dict[str, Any]:
    """``assistant_thread_context_changed``: the person now views ``channel``."""
    return {**started(channel, user=user), "type": "assistant_thread_context_changed"}


def asked(text: str, ts: str, *, user: str = "U1") -> dict[str, Any]:
    """A person's message in the assistant thread (a DM thread message event)."""
    return mention(text, ts=ts, user=user, channel=DM, kind="message", thread_ts=THREAD)
