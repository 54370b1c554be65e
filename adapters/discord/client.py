"""The discord.py client: Discord messages in, ``ChatService`` calls, Discord messages out.

It records every human message it can read in text channels, threads and DMs, answers
when mentioned, in DMs and to replies to its own messages (as a Discord reply, "typing"
meanwhile; ``bot.conversation.reply_flow`` through ``DiscordReplies``), and forwards edits and
deletions. A message is translated once (where the bot may not answer, it is not
addressed), handed to the service once and answered once. Every send carries
``AllowedMentions.none()``, so model output can never ping anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import discord
from discord import app_commands

from adapters.backfill import Backfiller, HistoryStore
from adapters.discord.access import reads_history
from adapters.discord.backfill import discord_backfiller, on_shard
from adapters.discord.catchup import register_outlet
from adapters.discord.chain import ReplyChains
from adapters.discord.commands import add_commands
from adapters.discord.options import PERMISSION_NAMES, guild_ids, reset_permission
from adapters.discord.outlet import DiscordReplies
from adapters.discord.text import NO_PINGS, channel_key, parent_of, role_ids
from adapters.discord.text import to_incoming as translate
from bot.platform import (
    COMMANDS,
    Features,
    IncomingMessage,
    Registry,
    ReplyFlow,
    Settings,
    answer_missed_mentions,
    plural,
    stop_answering_missed,
)

__all__ = ["GistbotClient"]

log = logging.getLogger(__name__)


class GistbotClient(discord.AutoShardedClient):
    """discord.py client that hands messages and commands to a ``ChatService``.

    Auto-sharded: one process runs every shard Discord recommends; several processes split
    them with ``shard_count=`` and ``shard_ids=`` (``adapters.discord.options.shards``).
    """

    def __init__(self, features: Features, settings: Settings, *,
                 history: HistoryStore | None = None, commands: Registry = COMMANDS,
                 **kwargs: Any) -> None:
        # Only what the bot reads: servers and channels (names, permissions), messages in
        # them and in DMs, and their content (privileged: enable it in the Developer Portal).
        intents = discord.Intents(guilds=True, guild_messages=True, dm_messages=True,
                                  message_content=True)
        kwargs.setdefault("allowed_mentions", NO_PINGS)
        super().__init__(intents=intents, **kwargs)
        self.service, self.features = features.service, features
        self.settings = settings
        self.tree = app_commands.CommandTree(self)
        chat, backfill = settings.chat, settings.restarts.backfill_max_messages
        self._warned: set[tuple[int, str]] = set()
        self._replying: set[asyncio.Task[Any]] = set()  # message handlers in flight
        self._missed: asyncio.Task[None] | None = None
        self._sweeping = asyncio.Event()
        self.flow = ReplyFlow(DiscordReplies(
            self, stream_interval=chat.stream_interval if chat.stream_replies else None,
            may_reference=self._may_reference, forbidden=self._forbidden,
            timeout=chat.post_timeout), features.outbox)
        # the registry's commands
        add_commands(self.tree, features, reset_permission(settings.discord), commands,
                     timeout=chat.post_timeout)
        # Backfill after downtime (adapters.backfill): needs the store's history cursor.
        self.backfill: Backfiller | None = (
            discord_backfiller(self, features.service, history, backfill)
            if history is not None and backfill > 0 else None)
        register_outlet(self, features, timeout=chat.post_timeout)  # scheduled digests
        self.chains = ReplyChains(self._cached)  # what a reply answers, up the chain

    # ------------------------------------------------------------------ lifecycle

    async def setup_hook(self) -> None:
        """Tell the service who the bot is, then register the slash commands."""
        if self.user is not None:
            self.service.set_identity("discord", str(self.user.id), self.user.display_name)
        # Startup hook: answer the mentions a crash left unanswered, then keep sweeping.
        self._missed = asyncio.create_task(
            answer_missed_mentions(self.features, "discord", self.flow, self._sweeping,
                                   refresh=self._author_now))
        targets: list[discord.Object | None] = [
            discord.Object(g) for g in guild_ids(self.settings.discord)]
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
        self.features.observers.connected("discord")

    async def on_disconnect(self) -> None:
        """Not ready while the gateway link is down (discord.py reconnects by itself)."""
        self.features.observers.disconnected("discord")

    async def on_resumed(self) -> None:
        """The gateway session resumed: ready again."""
        self.features.observers.connected("discord")

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

    def _cached(self, message_id: int) -> discord.Message | None:
        """The message with this id in discord.py's message cache, if it is there."""
        return discord.utils.find(lambda m: m.id == message_id, reversed(self.cached_messages))

    async def _author_now(self, msg: IncomingMessage) -> IncomingMessage:
        """``msg`` (rebuilt from storage for a late answer) with what Discord says now:
        a DM or not, the author's roles (asked of Discord: members are not cached without
        the members intent; someone who left the server has none), a thread's parent and
        whether they may read the channel's history.
        A failed lookup raises: the answer stays owed and is tried again."""
        if msg.key.workspace == "dm":
            return replace(msg, is_direct=True, roles=())
        guild = self.get_guild(int(msg.key.workspace))
        if guild is None:
            return replace(msg, roles=())
        member = guild.get_member(int(msg.author_id))
        if member is None:
            try:
                member = await guild.fetch_member(int(msg.author_id))
            except discord.NotFound:
                member = None
        channel = self.get_channel(int(msg.key.channel))
        return replace(msg, roles=role_ids(member) if member is not None else (),
                       parent=parent_of(channel),
                       reads_history=channel is not None and reads_history(channel, member))

    def to_incoming(self, message: discord.Message) -> IncomingMessage | None:
        """The service's view of ``message``: not addressed where the bot may not answer."""
        if self.user is None:
            return None
        self.chains.note(message, self.user.id)
        incoming = translate(message, self.user.id)
        if incoming is None:
            return None
        addressed = incoming.mentions_bot or incoming.is_direct or incoming.reply_to_bot
        if addressed and not self._may_send(message.channel):
            return replace(incoming, mentions_bot=False, is_direct=False, reply_to_bot=False)
        if addressed:  # read only when the reply is composed
            incoming = replace(incoming, chain=self.chains.source(message, self.user.id))
        return incoming

    async def on_message(self, message: discord.Message) -> None:
        """Record a human message; answer it when addressed (``bot.conversation.reply_flow``)."""
        incoming = self.to_incoming(message)
        if incoming is None:
            return
        task = asyncio.current_task()
        if task is not None:
            self._replying.add(task)
        try:
            received = await self.service.receive(incoming)
            if received.reply is not None:
                await self.flow.deliver(received.reply)
        except Exception:
            log.exception("handling message %s in %s failed", message.id, incoming.key)
        finally:
            self._replying.discard(task)  # type: ignore[arg-type]

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
