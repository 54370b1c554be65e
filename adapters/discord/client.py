"""The discord.py client: Discord messages in, ``ChatService`` calls, Discord messages out.

It records every human message it can read in text channels, threads and DMs, answers
when mentioned, in DMs and to replies to its own messages (as a Discord reply, "typing"
meanwhile), and forwards edits and deletions. A message is translated once (where the
bot may not answer, it is not addressed), decided once (``will_reply``: the channel's
``reply_mode``) and answered once. Every send carries ``AllowedMentions.none()``, so
model output can never ping anyone.
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

from adapters.backfill import Backfiller, HistoryStore
from adapters.discord.backfill import discord_backfiller, on_shard
from adapters.discord.catchup import register_outlet
from adapters.discord.commands import add_commands
from adapters.discord.options import PERMISSION_NAMES, DiscordOptions
from adapters.discord.outlet import DiscordPosts
from adapters.discord.text import (
    MAX_MESSAGES,
    MESSAGE_LIMIT,
    NO_PINGS,
    channel_key,
    plan_reply,
    preview,
)
from adapters.discord.text import to_incoming as translate
from adapters.replies import LiveThrottle
from bot.commands.declare import Registry
from bot.commands.registry import COMMANDS
from bot.messages import IncomingMessage, Reply
from bot.outbox import Outbox, Post, reply_id
from bot.owed import answer_missed_mentions, stop_answering_missed
from bot.service import ChatService
from bot.shutdown import SHUTDOWN_APOLOGY
from bot.wording import plural
from memory.models import ChannelKey, OwedReply

__all__ = ["GistbotClient"]

log = logging.getLogger(__name__)


class _LiveReply:
    """A streamed answer: sent at the first delta, edited at most once per ``interval``."""

    def __init__(self, client: GistbotClient, trigger: discord.Message, incoming: IncomingMessage,
                 interval: float) -> None:
        self.client, self.trigger, self.incoming = client, trigger, incoming
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
                if self.message is not None and (owed := self.client.service.owed) is not None:
                    # a late answer replaces this start instead of leaving it beside it
                    await owed.showing(self.incoming.key, self.incoming.message_id,
                                       str(self.message.id))
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

    def __init__(self, service: ChatService, options: DiscordOptions, *,
                 history: HistoryStore | None = None, commands: Registry = COMMANDS,
                 **kwargs: Any) -> None:
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
        self._replying: set[asyncio.Task[Any]] = set()  # message handlers in flight
        self._missed: asyncio.Task[None] | None = None
        self._sweeping = asyncio.Event()
        self.posts = DiscordPosts(self, may_reference=self._may_reference,
                                  forbidden=self._forbidden)
        self.outbox = service.outbox or Outbox(None)  # every answer goes through it
        add_commands(self.tree, service, options, commands)  # the registry's commands
        # Backfill after downtime (adapters.backfill): needs the store's history cursor.
        self.backfill: Backfiller | None = (
            discord_backfiller(self, service, history, options.backfill_max_messages)
            if history is not None and options.backfill_max_messages > 0 else None)
        register_outlet(self, service)  # scheduled digests post through this client

    # ------------------------------------------------------------------ lifecycle

    async def setup_hook(self) -> None:
        """Tell the service who the bot is, then register the slash commands."""
        if self.user is not None:
            self.service.set_identity("discord", str(self.user.id), self.user.display_name)
        # Startup hook: answer the mentions a crash left unanswered, then keep sweeping.
        self._missed = asyncio.create_task(
            answer_missed_mentions(self.service, "discord", self.deliver_owed, self._sweeping))
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

    async def shutdown(self, grace: float) -> None:
        """Stop taking events (the gateway is closed), give replies in flight ``grace``
        seconds, end the rest with an apology (answered after the restart), then close."""
        await self._stop_sweeping(grace)
        for shard in list(self.shards.values()):
            with contextlib.suppress(Exception):
                await shard.disconnect()
        pending = {t for t in self._replying if not t.done()}
        if pending:
            log.info("waiting up to %.0f s for %d replies in flight", grace, len(pending))
            _, pending = await asyncio.wait(pending, timeout=grace)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self.close()

    async def close(self) -> None:
        """Stop answering missed mentions and a backfill in progress, then close the
        connection (discord.py)."""
        await self._stop_sweeping()
        if self.backfill is not None:
            await self.backfill.close()
        await super().close()

    async def _stop_sweeping(self, grace: float = 0.0) -> None:
        task, self._missed = self._missed, None
        await stop_answering_missed(task, self._sweeping, grace)

    async def on_ready(self) -> None:
        """Log where the bot is."""
        log.info("connected to Discord as %s in %s", self.user,
                 plural(len(self.guilds), "server"))
        self.service.observer.connected("discord")

    async def on_disconnect(self) -> None:
        """Not ready while the gateway link is down (discord.py reconnects by itself)."""
        self.service.observer.disconnected("discord")

    async def on_resumed(self) -> None:
        """The gateway session resumed: ready again."""
        self.service.observer.connected("discord")

    async def on_shard_ready(self, shard_id: int) -> None:
        """A shard has a new session (start, or after a lost one): read what it missed."""
        self.start_backfill(f"shard {shard_id} ready", shard_id)

    async def on_shard_resumed(self, shard_id: int) -> None:
        """A shard resumed its session: read what it missed while disconnected."""
        self.start_backfill(f"shard {shard_id} resumed", shard_id)

    def start_backfill(self, reason: str, shard_id: int) -> None:
        """Backfill the channels of ``shard_id`` in the background (no-op when off)."""
        if self.backfill is not None:
            self.backfill.trigger(reason, on_shard(self, shard_id))

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
        task = asyncio.current_task()
        if task is not None:
            self._replying.add(task)
        try:
            if not await self.service.will_reply(incoming):  # the channel's reply_mode
                await self.service.on_message(incoming)
                return
            await self._answer(message, incoming)
        except Exception:
            log.exception("handling message %s in %s failed", message.id, incoming.key)
        finally:
            self._replying.discard(task)  # type: ignore[arg-type]

    async def _answer(self, message: discord.Message, incoming: IncomingMessage) -> None:
        live = (_LiveReply(self, message, incoming, self.options.stream_interval)
                if self.options.stream_replies else None)
        sending = False
        try:
            async with self._typing(message.channel):
                reply = await self.service.on_message(
                    incoming, on_delta=live.update if live else None)
            if reply is not None:
                sending = True
                if reply.private:  # e.g. the quota notice: a DM
                    await self._tell_privately(message, reply.text,
                                               live.message if live else None)
                    ok = True
                else:
                    ok = await self._deliver(incoming.key, incoming.message_id, reply,
                                             live.message if live else None)
                await self.service.delivered(incoming, ok)
        except asyncio.CancelledError:  # shutdown's grace ran out
            if not sending:
                await asyncio.shield(self._cut_short(message, incoming, live))
            raise

    async def _cut_short(self, message: discord.Message, incoming: IncomingMessage,
                         live: _LiveReply | None) -> None:
        """Say sorry instead of the answer; the debt is released, so the message is answered
        after the restart (or by another replica)."""
        try:
            if live is not None and live.message is not None:
                with contextlib.suppress(discord.HTTPException):
                    await live.message.edit(content=SHUTDOWN_APOLOGY, allowed_mentions=NO_PINGS)
                if self.service.owed is not None:  # the apology stays; the answer follows it
                    await self.service.owed.showing(incoming.key, incoming.message_id, "")
            else:
                await self.send_chunk(message, SHUTDOWN_APOLOGY, True)
        finally:
            await self.service.delivered(incoming, False)

    async def deliver_owed(self, owed: OwedReply, reply: Reply) -> bool:
        """Deliver the late answer to a mention a crash left unanswered (``bot.owed``),
        replacing the streamed start the first attempt showed."""
        into = (self.posts.channel(owed.key).get_partial_message(int(owed.placeholder))
                if owed.placeholder else None)
        return await self._deliver(owed.key, owed.message_id, reply, into)

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

    async def _deliver(self, key: ChannelKey, message_id: str, reply: Reply,
                       live: discord.Message | discord.PartialMessage | None) -> bool:
        """The reply to ``message_id``, through the outbox: into ``live`` (a streamed
        start) when there is one, its debt settled with the last message."""
        plan = plan_reply(reply.text, limit=MESSAGE_LIMIT, max_messages=MAX_MESSAGES)
        last = len(plan.messages) - 1
        posts = [Post(key, reply_id(key, message_id, i, notice=reply.failed), chunk, message_id,
                      first=i == 0, attachment=(plan.attachment or "") if i == last else "")
                 for i, chunk in enumerate(plan.messages)]
        return await self.outbox.send_all(self.posts, posts,
                                          into=str(live.id) if live is not None else "",
                                          settle=message_id)

    async def _tell_privately(self, trigger: discord.Message, text: str,
                              live: discord.Message | None) -> None:
        """A direct message to the author (Discord has no private message in a channel)."""
        if live is not None:
            with contextlib.suppress(discord.HTTPException):
                await live.delete()
        try:
            await trigger.author.send(text, allowed_mentions=NO_PINGS)
        except discord.HTTPException:
            log.warning("could not DM %s (direct messages closed?)", trigger.author.id)

    async def send_chunk(self, trigger: discord.Message | discord.PartialMessage,
                         content: str, as_reply: bool,
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
            self._forbidden(channel)
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

    def _forbidden(self, channel: Any) -> None:
        """Discord refused a message: say which permission is missing."""
        self._warn_missing(channel, "send_messages_in_threads"
                           if isinstance(channel, discord.Thread) else "send_messages")

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
