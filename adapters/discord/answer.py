"""A command's public answer on Discord, shown exactly once: it is put into the command's
own deferred response ("thinking…"), not sent as a follow-up.

A follow-up is a webhook create: it takes no nonce, and discord.py's webhook adapter
repeats it after a 5xx, so an answer Discord created before failing showed twice; after a
reset or a timeout nobody could tell whether it was shown. Editing the original response
(``PATCH /webhooks/{app}/{token}/messages/@original``) is idempotent: the same text into
the same message shows the same however often it is done, so discord.py's own repeat is
harmless and an unknown outcome is settled by editing again, under the one rule for
ambiguous outcomes (``bot.conversation.lookup``: an edit is its own lookup). The answer is
one message; what does not fit is attached as a file, since further messages would be
creates again.
"""

from __future__ import annotations

import logging

import discord

from adapters.discord.outlet import unknown_when_lost
from adapters.discord.text import NO_PINGS, channel_key, plan_reply, text_file
from bot.platform import ChannelKey, OutcomeUnknown, Post

__all__ = ["ORIGINAL", "InteractionAnswer", "answer_post"]

log = logging.getLogger(__name__)
ORIGINAL = "@original"  # the message id of an interaction's own response


def answer_post(interaction: discord.Interaction, text: str) -> Post:
    """The public answer to ``interaction`` as one post: the first message's worth of
    ``text``, the rest attached (its outbox id is the interaction's, for the logs)."""
    plan = plan_reply(text, max_messages=1)
    key = channel_key(interaction.guild_id, interaction.channel_id or 0)
    return Post(key, f"interaction:{interaction.id}", plan.messages[0] if plan.messages
                else "…", attachment=plan.attachment or "")


class InteractionAnswer:
    """``bot.conversation.posts.PostOutlet`` over one interaction's original response: a
    post and an edit both put the text into it (the deferral is its placeholder), a
    delete deletes it, and ``find`` reads it back."""

    def __init__(self, interaction: discord.Interaction, *, timeout: float) -> None:
        self.interaction = interaction
        self.timeout = timeout  # seconds a call may take before its outcome is unknown

    async def post(self, post: Post) -> str | None:
        return ORIGINAL if await self.edit(post, ORIGINAL) else None

    async def edit(self, post: Post, message_id: str) -> bool:
        files = [text_file(post.attachment)] if post.attachment else []  # fresh each call
        try:
            await unknown_when_lost("answer", self.interaction.edit_original_response(
                content=post.text, attachments=files, allowed_mentions=NO_PINGS), self.timeout)
        except discord.HTTPException:
            log.exception("could not answer a slash command")
            return False
        return True

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        try:
            await unknown_when_lost("delete", self.interaction.delete_original_response(),
                                    self.timeout)
        except discord.NotFound:  # gone already
            return True
        except discord.HTTPException:
            log.warning("could not delete a slash command's response", exc_info=True)
            return False
        return True

    async def find(self, post: Post) -> str | None:
        """The original response when it already shows ``post``'s text."""
        try:
            shown = await unknown_when_lost("read", self.interaction.original_response(),
                                            self.timeout)
        except discord.NotFound:
            return None
        except discord.HTTPException as e:  # no telling: looked at again, not edited blind
            raise OutcomeUnknown(f"Discord read: HTTP {e.status}") from e
        return ORIGINAL if shown.content == post.text else None
