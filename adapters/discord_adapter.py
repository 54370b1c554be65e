"""The Discord adapter: discord.py events in, ``ChatService`` calls, Discord messages out.

``to_incoming`` is the whole translation of a Discord message (pure: no network). The
client records every human message it can read in text channels, threads and DMs, answers
when mentioned, in DMs and to replies to its own messages (as a Discord reply, "typing"
meanwhile), forwards edits and deletions, and serves ``/summary``, ``/reset``, ``/remember``,
``/memory`` (ephemeral) and ``/forget`` (the same permission as ``/reset``). Every
send carries ``AllowedMentions.none()``, so model output can never ping anyone.

Start it with ``await run_discord(runtime)``; nothing here is created at import time.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

import discord
from discord import app_commands

from adapters.discord_text import (
    MAX_MESSAGES,
    MESSAGE_LIMIT,
    channel_key,
    plan_reply,
    preview,
    to_incoming,
)
from bot.app import Runtime
from bot.errors import ConfigError, GistbotError
from bot.messages import CommandResult
from bot.service import ChatService
from bot.settings import Settings
from memory.models import ChannelKey

__all__ = [
    "INVITE_PERMISSIONS",
    "DiscordOptions",
    "GistbotClient",
    "channel_key",
    "create_client",
    "invite_url",
    "run_discord",
    "to_incoming",
]

log = logging.getLogger(__name__)
NO_PINGS = discord.AllowedMentions.none()
_FAILED = GistbotError.user_message

# What the bot needs, and nothing more: see the channel, read and answer in channels and
# threads, reply to a message (needs history), and attach the .txt overflow of long replies.
INVITE_PERMISSIONS = discord.Permissions(
    view_channel=True,
    send_messages=True,
    send_messages_in_threads=True,
    read_message_history=True,
    attach_files=True,
)
_PERMISSION_NAMES = {
    "view_channel": "View Channels",
    "send_messages": "Send Messages",
    "send_messages_in_threads": "Send Messages in Threads",
    "read_message_history": "Read Message History",
    "attach_files": "Attach Files",
}


def invite_url(application_id: int | str) -> str:
    """The OAuth2 URL that adds the bot to a server with exactly the scopes and
    permissions it needs (``bot`` and ``applications.commands``)."""
    query = urlencode({
        "client_id": str(application_id),
        "scope": "bot applications.commands",
        "permissions": str(INVITE_PERMISSIONS.value),
    })
    return f"https://discord.com/oauth2/authorize?{query}"


@dataclass(frozen=True, slots=True)
class DiscordOptions:
    """The Discord-specific settings, checked."""

    token: str
    guild_ids: tuple[int, ...] = ()
    reset_permission: str = "manage_messages"
    stream_replies: bool = False
    stream_interval: float = 1.0  # seconds between edits of a streamed reply

    @classmethod
    def from_settings(cls, settings: Settings) -> DiscordOptions:
        """Read and check ``DISCORD_*`` and ``STREAM_REPLIES``; ``ConfigError`` names the fix."""
        if settings.discord_token is None:
            raise ConfigError("DISCORD_TOKEN is not set: copy the bot token from the Discord "
                              "Developer Portal (Bot → Reset Token) into .env")
        try:
            guild_ids = tuple(int(g) for g in settings.discord_guild_ids)
        except ValueError:
            raise ConfigError("DISCORD_GUILD_IDS must be comma-separated server ids (numbers; "
                              "Developer Mode → right-click the server → Copy Server ID)") from None
        perm = settings.discord_reset_permission.strip().lower()
        if perm not in discord.Permissions.VALID_FLAGS:
            raise ConfigError(f"DISCORD_RESET_PERMISSION: {perm!r} is not a Discord permission; "
                              "use a name such as manage_messages or administrator")
        return cls(settings.discord_token.get_secret_value(), guild_ids, perm,
                   settings.stream_replies)


class _LiveReply:
    """A streamed answer: sent at the first delta, edited at most once per ``interval``."""

    def __init__(self, client: GistbotClient, trigger: discord.Message, interval: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.trigger, self.interval, self.clock = client, trigger, interval, clock
        self.message: discord.Message | None = None
        self.last = float("-inf")
        self.broken = False

    async def update(self, text: str) -> None:
        now = self.clock()
        if self.broken or now - self.last < self.interval:
            return
        self.last = now
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
    them with ``shard_count=`` and ``shard_ids=`` (passed through ``create_client``).
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
        self._add_commands()

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

    async def on_message(self, message: discord.Message) -> None:
        """Record a human message; answer it when addressed."""
        if self.user is None:
            return
        incoming = to_incoming(message, self.user.id)
        if incoming is None:
            return
        addressed = self.service.should_reply(incoming)
        if addressed and not self._may_send(message.channel):
            incoming = replace(incoming, mentions_bot=False, is_direct=False, reply_to_bot=False)
            addressed = self.service.should_reply(incoming)
        try:
            if not addressed:
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
        incoming = to_incoming(payload.message, self.user.id)
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
            file = _text_file(plan.attachment) if last and plan.attachment else None
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
            _PERMISSION_NAMES.get(permission, permission),
            "; replying without quoting the message meanwhile"
            if permission == "read_message_history" else "",
        )

    # ------------------------------------------------------------------ commands

    def _add_commands(self) -> None:
        @app_commands.command(name="summary",
                              description="What this channel has talked about, as I remember it")
        @app_commands.describe(public="Show it to everyone here (default: only you)")
        async def summary(interaction: discord.Interaction, public: bool = False) -> None:
            await self._summary(interaction, public)

        @app_commands.command(name="reset", description="Forget this channel's conversation")
        async def reset(interaction: discord.Interaction) -> None:
            await self._reset(interaction)

        @app_commands.command(name="remember", description="Pin a fact for this channel")
        @app_commands.describe(text="What to remember")
        async def remember(interaction: discord.Interaction, text: str) -> None:
            await self._run(interaction, "remember", lambda key: self.service.remember(
                key, text, author=interaction.user.display_name))

        @app_commands.command(name="memory",
                              description="The facts I keep for this channel (only you see it)")
        async def memory(interaction: discord.Interaction) -> None:
            await self._run(interaction, "memory", self.service.memory_list)

        @app_commands.command(name="forget", description="Forget one fact of this channel")
        @app_commands.describe(fact="The fact's id (see /memory) or its text")
        async def forget(interaction: discord.Interaction, fact: str) -> None:
            allowed, refusal = self._may_reset(interaction)
            await self._run(interaction, "forget", lambda key: self.service.forget(
                key, fact, allowed=allowed, refusal=refusal.replace("reset", "change")))

        needed = discord.Permissions(**{self.options.reset_permission: True})
        reset.default_permissions = needed
        forget.default_permissions = needed
        self.tree.add_command(summary)
        self.tree.add_command(reset)
        self.tree.add_command(remember)
        self.tree.add_command(memory)
        self.tree.add_command(forget)

    def _may_reset(self, interaction: discord.Interaction) -> tuple[bool, str]:
        """Whether the caller may ``/reset`` (and ``/forget``) here, and the refusal text."""
        perms = interaction.permissions
        allowed = (interaction.guild_id is None or perms.administrator
                   or bool(getattr(perms, self.options.reset_permission)))
        perm = self.options.reset_permission.replace("_", " ").title()
        return allowed, f"You need the {perm} permission to reset this channel's memory."

    async def _run(self, interaction: discord.Interaction, name: str,
                   work: Callable[[ChannelKey], Awaitable[CommandResult]]) -> None:
        """Defer (ephemeral), run ``work`` for the channel, answer only the caller."""
        if not await _defer(interaction, ephemeral=True):
            return
        try:
            text = (await work(_interaction_key(interaction))).text
        except Exception:
            log.exception("/%s failed", name)
            text = _FAILED
        await _followup(interaction, text, ephemeral=True)

    async def _summary(self, interaction: discord.Interaction, public: bool) -> None:
        if not await _defer(interaction, ephemeral=not public):
            return
        try:
            text = (await self.service.summary(_interaction_key(interaction))).text
        except Exception:
            log.exception("/summary failed")
            text = _FAILED
        await _followup(interaction, text, ephemeral=not public)

    async def _reset(self, interaction: discord.Interaction) -> None:
        if not await _defer(interaction, ephemeral=True):
            return
        allowed, refusal = self._may_reset(interaction)
        try:
            result = await self.service.reset(
                _interaction_key(interaction), allowed=allowed, refusal=refusal
            )
            text = result.text
        except Exception:
            log.exception("/reset failed")
            text = _FAILED
        await _followup(interaction, text, ephemeral=True)


def _interaction_key(interaction: discord.Interaction) -> ChannelKey:
    return channel_key(interaction.guild_id, interaction.channel_id or 0)


async def _defer(interaction: discord.Interaction, *, ephemeral: bool) -> bool:
    """Acknowledge at once ("thinking…"), so Discord's 3-second limit cannot be hit."""
    try:
        await interaction.response.defer(ephemeral=ephemeral, thinking=True)
        return True
    except discord.HTTPException:
        log.exception("could not acknowledge /%s in time", interaction.command and
                      interaction.command.name)
        return False


async def _followup(interaction: discord.Interaction, text: str, *, ephemeral: bool) -> None:
    plan = plan_reply(text)
    try:
        for i, chunk in enumerate(plan.messages):
            kwargs: dict[str, Any] = {"ephemeral": ephemeral, "allowed_mentions": NO_PINGS}
            if plan.attachment and i == len(plan.messages) - 1:
                kwargs["file"] = _text_file(plan.attachment)
            await interaction.followup.send(chunk, **kwargs)
    except discord.HTTPException:
        log.exception("could not answer a slash command")


def _text_file(text: str) -> discord.File:
    return discord.File(io.BytesIO(text.encode("utf-8")), filename="reply.txt")


def create_client(runtime: Runtime, **client_options: Any) -> GistbotClient:
    """A client for ``runtime``'s service (options pass through to ``discord.Client``)."""
    return GistbotClient(runtime.service, DiscordOptions.from_settings(runtime.settings),
                         **client_options)


async def run_discord(runtime: Runtime) -> None:
    """Connect to Discord and serve until cancelled or the connection ends for good.

    Raises ``ConfigError`` for missing settings, a bad token, or the Message Content
    intent not enabled in the Developer Portal.
    """
    shards: dict[str, Any] = {}
    if runtime.settings.shard_count:
        # This process runs SHARD_IDS (all when unset) of SHARD_COUNT; spread the rest
        # over other processes sharing the same PostgreSQL.
        shards["shard_count"] = runtime.settings.shard_count
        if runtime.settings.shard_ids:
            shards["shard_ids"] = runtime.settings.shard_ids
    client = create_client(runtime, **shards)
    try:
        async with client:
            await client.start(client.options.token)
    except discord.LoginFailure:
        raise ConfigError("DISCORD_TOKEN was rejected by Discord: copy a fresh token from the "
                          "Developer Portal (Bot → Reset Token)") from None
    except discord.PrivilegedIntentsRequired:
        raise ConfigError("Discord refused the Message Content intent: enable it in the "
                          "Developer Portal (Bot → Privileged Gateway Intents → Message "
                          "Content Intent)") from None
