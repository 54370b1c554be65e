"""Discord's outlet for the outbox (``bot.conversation.outbox.PostOutlet``).

Every message is created with a ``nonce`` derived from its outbox id; discord.py sends
``enforce_nonce`` with it, so Discord returns the message it already created for the same
nonce by the same author within a few minutes instead of creating another. That is how a
retry after a crash finds its earlier post: by posting again (``find`` has nothing to
read, since Discord does not return nonces in history). A call whose outcome is unknown (a
5xx after discord.py's own retries, which repeat a create with its nonce; a reset; no answer
within ``timeout``) raises ``OutcomeUnknown``, and the outbox repeats it the same way
(``bot.conversation.lookup``).

``DiscordReplies`` adds what ``bot.conversation.reply_flow`` needs for a reply: no placeholder but
"typing…" meanwhile (a streamed reply's first text is posted instead), chunks with the
overflow attached as a file, and a direct message for an answer to its author only.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import discord

from adapters.discord.text import MAX_MESSAGES, MESSAGE_LIMIT, NO_PINGS, plan_reply, text_file
from adapters.discord.text import preview as preview_of
from bot.platform import ChannelKey, IncomingMessage, OutcomeUnknown, Post

__all__ = ["DiscordPosts", "DiscordReplies", "nonce"]

log = logging.getLogger(__name__)
NONCE_CHARS = 25  # Discord's limit on a string nonce
T = TypeVar("T")


async def unknown_when_lost(what: str, request: Awaitable[T], within: float) -> T:
    """``request``'s answer; ``OutcomeUnknown`` when it may or may not have taken effect
    (a 5xx, a reset connection, no answer within ``within`` seconds)."""
    try:
        async with asyncio.timeout(within):
            return await request
    except discord.DiscordServerError as e:
        raise OutcomeUnknown(f"Discord {what}: HTTP {e.status}") from e
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError) as e:
        raise OutcomeUnknown(f"Discord {what}: {type(e).__name__}") from e


def nonce(outbox_id: str) -> str:
    """The message nonce of an outbox id (a digest of it: outbox ids are longer)."""
    return hashlib.sha256(outbox_id.encode()).hexdigest()[:NONCE_CHARS]


class DiscordPosts:
    """Posts, edits and deletes the bot's messages; ``may_reference`` and ``forbidden``
    let the client check and report its permissions (a reply quotes its trigger only
    where the bot may read the history)."""

    def __init__(self, client: discord.Client, *,
                 may_reference: Callable[[Any], bool] = lambda channel: True,
                 forbidden: Callable[[Any], None] = lambda channel: None,
                 timeout: float = 30.0) -> None:
        self.client = client
        self.may_reference, self.forbidden = may_reference, forbidden
        self.timeout = timeout  # seconds a call may take before its outcome is unknown

    def channel(self, key: ChannelKey) -> Any:
        """The channel of ``key`` (a partial one when it is not cached)."""
        channel: Any = self.client.get_channel(int(key.channel))
        if not isinstance(channel, discord.TextChannel | discord.Thread | discord.DMChannel):
            guild = None if key.workspace == "dm" else int(key.workspace)
            channel = self.client.get_partial_messageable(int(key.channel), guild_id=guild)
        return channel

    async def post(self, post: Post) -> str | None:
        channel = self.channel(post.key)
        kwargs: dict[str, Any] = {"allowed_mentions": NO_PINGS, "nonce": nonce(post.outbox_id)}
        if post.reply_to and post.first and self.may_reference(channel):
            trigger = channel.get_partial_message(int(post.reply_to))
            kwargs["reference"] = trigger.to_reference(fail_if_not_exists=False)
        if post.attachment:
            kwargs["file"] = text_file(post.attachment)
        try:
            sent = await unknown_when_lost("send", channel.send(post.text, **kwargs),
                                           self.timeout)
        except discord.Forbidden:
            self.forbidden(channel)
            return None
        except discord.HTTPException:
            log.exception("sending a message in %s failed", post.key.channel)
            return None
        return str(sent.id)

    async def edit(self, post: Post, message_id: str) -> bool:
        message = self.channel(post.key).get_partial_message(int(message_id))
        try:
            await unknown_when_lost("edit", message.edit(content=post.text,
                                                         allowed_mentions=NO_PINGS), self.timeout)
        except discord.HTTPException:
            log.warning("could not edit message %s in %s", message_id, post.key.channel,
                        exc_info=True)
            return False
        return True

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        try:
            await unknown_when_lost(
                "delete", self.channel(key).get_partial_message(int(message_id)).delete(),
                self.timeout)
        except discord.NotFound:  # gone already (an earlier attempt deleted it)
            return True
        except discord.HTTPException:
            log.warning("could not delete message %s in %s", message_id, key.channel,
                        exc_info=True)
            return False
        return True

    async def find(self, post: Post) -> str | None:
        return None  # posting again with the same nonce returns the earlier message


class DiscordReplies(DiscordPosts):
    """``bot.conversation.reply_flow.ReplyOutlet`` for Discord: a reply quotes its trigger."""

    placeholder = ""  # "typing…" says it; a streamed reply's start is posted at once

    def __init__(self, client: discord.Client, *, stream_interval: float | None,
                 may_reference: Callable[[Any], bool] = lambda channel: True,
                 forbidden: Callable[[Any], None] = lambda channel: None,
                 timeout: float = 30.0) -> None:
        super().__init__(client, may_reference=may_reference, forbidden=forbidden,
                         timeout=timeout)
        self.stream_interval = stream_interval

    def split(self, text: str) -> tuple[list[str], str]:
        plan = plan_reply(text, limit=MESSAGE_LIMIT, max_messages=MAX_MESSAGES)
        return list(plan.messages), plan.attachment or ""

    def preview(self, text: str) -> str:
        return preview_of(text)

    async def whisper(self, msg: IncomingMessage, text: str) -> None:
        """A direct message to the author (Discord has no private message in a channel)."""
        try:
            dm = await self.client.create_dm(discord.Object(int(msg.author_id)))
            await dm.send(text, allowed_mentions=NO_PINGS)
        except discord.HTTPException:
            log.warning("could not DM %s (direct messages closed?)", msg.author_id)

    @contextlib.asynccontextmanager
    async def working(self, key: ChannelKey) -> AsyncIterator[None]:
        """Show "typing…" meanwhile, without waiting for Discord to accept it."""
        channel = self.channel(key)
        stop = asyncio.Event()

        async def show() -> None:
            try:
                async with channel.typing():
                    await stop.wait()
            except discord.HTTPException:
                log.debug("typing indicator refused in %s", key.channel, exc_info=True)

        task = asyncio.create_task(show())
        try:
            yield
        finally:
            stop.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
