"""What adapters hand the service, and what the service hands back.

Adapters translate platform events into these plain values (and send the results); the
service never holds a platform object.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.models import ChannelKey

__all__ = ["CommandResult", "IncomingMessage", "Reply"]


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """One human message as the service sees it, platform-neutral."""

    key: ChannelKey
    message_id: str
    author_id: str
    author_name: str
    text: str
    sent_at: float
    mentions_bot: bool = False
    is_direct: bool = False
    reply_to_bot: bool = False
    route: str = ""  # what the adapter needs to answer it later (Slack: the thread's ts)


@dataclass(frozen=True, slots=True)
class Reply:
    """The bot's answer. ``failed`` marks a short error sentence instead of a model answer;
    ``private`` asks the adapter to show it to the author only (Slack: ephemeral; Discord:
    a direct message), e.g. the daily quota notice."""

    text: str
    failed: bool = False
    private: bool = False


@dataclass(frozen=True, slots=True)
class CommandResult:
    """Text for the caller of a slash command, and whether the command did its work."""

    text: str
    ok: bool = True
