"""The discord.py client: Discord messages in, ``ChatService`` calls, Discord messages out.

It records every human message it can read in text channels, threads and DMs, answers
when mentioned, in DMs and to replies to its own messages (as a Discord reply, "typing"
meanwhile), and forwards edits and deletions. A message is translated once (where the
bot may not answer, it is not addressed), decided once (``should_reply``) and answered
once. Every send carries ``AllowedMentions.none()``, so model output can never ping anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from typing import Any

import discord
from discord import app_commands

from adapters.discord.catchup import register_outlet
from adapters.discord.commands import add_commands
from adapters.discord.options import PERMISSION_NAMES, DiscordOptions
from adapters.discord.text import (
    MAX_MESSAGES,
    MESSAGE_LIMIT,
    NO_PINGS,
    channel_key,
    plan_reply,
    preview,
    text_file,
)
from adapters.discord.text import to_incoming as translate
from adapters.replies import LiveThrottle
from bot.messages import IncomingMessage
from bot.service import ChatService

__all__ = ["GistbotClient"]

log = logging.getLogger(__name__)


class _LiveReply:
    """A streamed answer: sent at the first delta, edited at most once per ``interval``."""

    def __init__(self, client: GistbotClient, trigger: discord.Message, interval: float) -> None:
        self.client, self.trigger = client, trigger
        self.throttle = LiveThrottle(interval)
        self.message: discord.Message | None = None
        self.broken = False

    async def update(self, text: str) -> None:
        if self.broken or not self.throttle.due():
            return
        try:
            if self.message is None:
                self.message = await self.client.send_chunk(self.trigger, preview(text), True)
                self.broken = self.message is None
            else:
                await self.message.edit(content=preview(text), allowed_mentions=NO_PINGS)
        except discord.HTTPException:
            log.warning("could not update a streamed reply in %s", self.trigger.channel.id,
                        exc_info=True)
            self.broken = True


class GistbotClient(discord.AutoShardedClient):
    """discord.py client that hands messages and commands to a ``ChatService``.

    Auto-sharded: one process runs every shard Discord recommends; several processes split
    them with ``shard_count=`` and ``shard_ids=`` (``DiscordOptions.shards``).
    """

    def __init__(self, service: ChatService, options: DiscordOptions, **kwargs: Any) -> None:
        # Only what the bot reads: servers and channels (names, permissions), messages in
        # them and in DMs, and their content (privileged: enable it in the Developer Portal).
        intents = discord.Intents(guilds=True, guild_messages=True, dm_messages=True,
                                  message_content=True)
        kwargs.setdefault("allowed_mentions", NO_PINGS)
        super().__init__(intents=intents, **kwargs)
        self.service = service
        self.options = options
        self.tree = app_commands.CommandTree(self)
        self._warned: set[tuple[int, str]] = set()
        add_commands(self.tree, service, options)
        register_outlet(self, service)  # scheduled digests post through this client

    # ------------------------------------------------------------------ lifecycle

    async def setup_hook(self) -> None:
        """Tell the service who the bot is, then register the slash commands."""
        if self.user is not None:
            self.service.set_identity("discord", str(self.user.id), self.user.display_name)
        targets: list[discord.Object | None] = [discord.Object(g) for g in self.options.guild_ids]
        for guild in targets or [None]:
            if guild is not None:
                self.tree.copy_global_to(guild=guild)
            try:
                await self.tree.sync(guild=guild)
            except discord.HTTPException:
                log.exception("could not register the slash commands %s; re-invite the bot "
                              "with the applications.commands scope (gistbot discord-invite)",
                              f"in server {guild.id}" if guild else "globally")

    async def on_ready(self) -> None:
        """Log where the bot is."""
        log.info("connected to Discord as %s in %d servers", self.user, len(self.guilds))

    # ------------------------------------------------------------------ messages

    def to_incoming(self, message: discord.Message) -> IncomingMessage | None:
        """The service's view of ``message``: not addressed where the bot may not answer."""
        if self.user is None:
            return None
        incoming = translate(message, self.user.id)
        if incoming is None:
            return None
        addressed = incoming.mentions_bot or incoming.is_direct or incoming.reply_to_bot
        if addressed and not self._may_send(message.channel):
            incoming = replace(incoming, mentions_bot=False, is_direct=False, reply_to_bot=False)
        return incoming

    async def on_message(self, message: discord.Message) -> None:
        """Record a human message; answer it when addressed."""
        incoming = self.to_incoming(message)
        if incoming is None:
            return
        try:
            if not self.service.should_reply(incoming):
                await self.service.on_message(incoming)
                return
            live = (_LiveReply(self, message, self.options.stream_interval)
                    if self.options.stream_replies else None)
            async with self._typing(message.channel):
                reply = await self.service.on_message(
                    incoming, on_delta=live.update if live else None)
            if reply is not None:
                await self._deliver(message, reply.text, live.message if live else None)
        except Exception:
            log.exception("handling message %s in %s failed", message.id, incoming.key)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        """An edited message updates its turn (embed previews are not edits)."""
        if self.user is None or payload.message.edited_at is None:
            return
        incoming = translate(payload.message, self.user.id)
        if incoming is not None:
            await self.service.edited(incoming.key, incoming.message_id, incoming.text)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        """A deleted message leaves memory (unless already summarized)."""
        key = channel_key(payload.guild_id, payload.channel_id)
        await self.service.deleted(key, str(payload.message_id))

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        """Each message of a bulk delete leaves memory."""
        key = channel_key(payload.guild_id, payload.channel_id)
        for message_id in sorted(payload.message_ids):
            await self.service.deleted(key, str(message_id))

    # ------------------------------------------------------------------ sending

    async def _deliver(self, trigger: discord.Message, text: str,
                       live: discord.Message | None) -> None:
        plan = plan_reply(text, limit=MESSAGE_LIMIT, max_messages=MAX_MESSAGES)
        for i, chunk in enumerate(plan.messages):
            last = i == len(plan.messages) - 1
            file = text_file(plan.attachment) if last and plan.attachment else None
            if i == 0 and live is not None:
                try:
                    await live.edit(content=chunk, allowed_mentions=NO_PINGS)
                    continue
                except discord.HTTPException:
                    log.warning("could not finish a streamed reply; sending it anew",
                                exc_info=True)
            if await self.send_chunk(trigger, chunk, i == 0, file) is None:
                return

    async def send_chunk(self, trigger: discord.Message, content: str, as_reply: bool,
                         file: discord.File | None = None) -> discord.Message | None:
        """Send one message to the trigger's channel; ``None`` (logged) if Discord refused."""
        channel = trigger.channel
        kwargs: dict[str, Any] = {"allowed_mentions": NO_PINGS}
        if as_reply and self._may_reference(channel):
            kwargs["reference"] = trigger.to_reference(fail_if_not_exists=False)
        if file is not None:
            kwargs["file"] = file
        try:
            return await channel.send(content, **kwargs)
        except discord.Forbidden:
            self._warn_missing(channel, "send_messages_in_threads"
                               if isinstance(channel, discord.Thread) else "send_messages")
        except discord.HTTPException:
            log.exception("sending a reply in %s failed", channel.id)
        return None

    @contextlib.asynccontextmanager
    async def _typing(self, channel: discord.abc.Messageable) -> AsyncIterator[None]:
        """Show "typing…" meanwhile, without waiting for it: the message must be recorded
        before any later message of the channel, so nothing may be awaited first."""
        stop = asyncio.Event()

        async def show() -> None:
            try:
                async with channel.typing():
                    await stop.wait()
            except discord.HTTPException:
                log.debug("typing indicator refused in %s", getattr(channel, "id", "?"),
                          exc_info=True)

        task = asyncio.create_task(show())
        try:
            yield
        finally:
            stop.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ------------------------------------------------------------------ permissions

    def _missing(self, channel: Any, names: Iterable[str]) -> list[str]:
        """Which of ``names`` the bot lacks in ``channel`` (none when it cannot tell)."""
        if not isinstance(channel, discord.abc.GuildChannel | discord.Thread):
            return []
        me = channel.guild.me
        if me is None:
            return []
        try:
            perms = channel.permissions_for(me)
        except discord.ClientException:
            return []
        return [n for n in names if not getattr(perms, n)]

    def _may_send(self, channel: Any) -> bool:
        send = ("send_messages_in_threads" if isinstance(channel, discord.Thread)
                else "send_messages")
        missing = self._missing(channel, ("view_channel", send))
        for name in missing:
            self._warn_missing(channel, name)
        return not missing

    def _may_reference(self, channel: Any) -> bool:
        missing = self._missing(channel, ("read_message_history",))
        for name in missing:
            self._warn_missing(channel, name)
        return not missing

    def _warn_missing(self, channel: Any, permission: str) -> None:
        if (channel.id, permission) in self._warned:
            return
        self._warned.add((channel.id, permission))
        where = f"#{channel.name}" if getattr(channel, "name", None) else str(channel.id)
        guild = getattr(channel, "guild", None)
        log.warning(
            "missing permission in %s%s: grant the bot '%s' there (Server Settings → Roles, "
            "or the channel's Edit Channel → Permissions)%s",
            where, f" ({guild.name})" if guild is not None else "",
            PERMISSION_NAMES.get(permission, permission),
            "; replying without quoting the message meanwhile"
            if permission == "read_message_history" else "",
        )
