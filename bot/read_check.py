"""The one read check: may this person read this channel's history?

Every path that shows a person what gistbot stored of a channel — ``/summary``,
``/memory``, ``/forget``'s confirmation, ``/catchup``, ``/digest`` — asks it before it
reads anything, and an answer posted for everyone asks it for everyone who can see the
post. The platform answers (``Access``, handed over by the adapter through
``bot.platform``): Discord, View Channel and Read Message History in the channel
(a thread: its parent's), Slack, membership of the conversation. Whatever the platform
cannot confirm counts as "no".

A command declares that its answer shows stored content (``Command.shows``); ``refusal``
is then asked before the command runs, by the one door every platform calls
(``Command.respond``), so a new command joins by saying so, not by remembering a check.
``bot.catchup.visibility`` asks the same ``Access`` for each thread a catch-up reads.

Replies ask it through the adapter: an author who may not read the history is answered
from their message alone (``IncomingMessage.reads_history``), and a channel in view (Slack's
assistant pane) comes checked (``IncomingMessage.viewing``). Not behind it: the admin
inspector, an operator's page behind ``ADMIN_TOKEN`` whose holder has the database itself.
"""

from __future__ import annotations

from typing import Protocol

from memory.models import ChannelKey

__all__ = ["CANNOT_READ", "NOT_FOR_EVERYONE", "OPEN", "Access", "refusal"]

CANNOT_READ = "You can't read this channel's history, so I can't show you what I remember of it."
NOT_FOR_EVERYONE = ("Not everyone who can see this channel may read its history, so I can't "
                    "post that here for everyone. Ask without public to see it yourself.")


class Access(Protocol):
    """What the platform can tell about one reader's access (a person, or everyone who can
    see a post in a channel); ``False`` when it cannot tell."""

    async def can_read(self, key: ChannelKey) -> bool:
        """Whether the reader may read the history of channel (or thread) ``key``."""

    async def is_member(self, key: ChannelKey) -> bool:
        """Whether the reader is a member of private thread ``key``."""


class _Open:
    """A reader who may read everything: the operator at the console, who holds the
    database anyway."""

    async def can_read(self, key: ChannelKey) -> bool:
        return True

    async def is_member(self, key: ChannelKey) -> bool:
        return True


OPEN: Access = _Open()


async def refusal(key: ChannelKey, reader: Access, everyone: Access, *,
                  public: bool) -> str | None:
    """Why stored content of ``key`` may not be shown (``None``: it may): to ``reader``,
    and when ``public`` also to ``everyone`` who can see a post there."""
    if not await reader.can_read(key):
        return CANNOT_READ
    if public and not await everyone.can_read(key):
        return NOT_FOR_EVERYONE
    return None
