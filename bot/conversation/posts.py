"""What the outbox sends and what it sends it through: a ``Post`` (one outgoing message with
its outbox id) and a platform's ``PostOutlet`` (post, edit, delete, find).

An outlet's post, edit and delete raise ``bot.errors.OutcomeUnknown`` when they cannot tell
whether they took effect; ``bot.conversation.lookup`` decides what happens then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from memory.models import ChannelKey

__all__ = ["Post", "PostOutlet"]


@dataclass(frozen=True, slots=True)
class Post:
    """One outgoing message: where, its outbox id, the text as the platform takes it.

    ``reply_to`` is the platform id of the message it answers (Slack: the thread's ts);
    ``first`` says whether it is a reply's first message (Discord quotes the trigger only
    there); ``attachment`` is text sent as a file with it (Discord, when over the limit).
    """

    key: ChannelKey
    outbox_id: str
    text: str
    reply_to: str = ""
    first: bool = True
    attachment: str = ""


class PostOutlet(Protocol):
    """A platform's small outlet: post, edit, delete, and find an earlier post. Each of the
    first three raises ``bot.errors.OutcomeUnknown`` when it cannot tell whether it took
    effect (``bot.conversation.lookup`` decides what then)."""

    async def post(self, post: Post) -> str | None:
        """Post it carrying its outbox id; the platform's message id, None if refused."""

    async def edit(self, post: Post, message_id: str) -> bool:
        """Put the post's text (and outbox id) into message ``message_id``."""

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        """Delete message ``message_id`` (True when it is gone already)."""

    async def find(self, post: Post) -> str | None:
        """The id of an earlier post carrying this outbox id, None if there is none; raises
        ``bot.errors.OutcomeUnknown`` when the platform could not be read (no telling)."""
