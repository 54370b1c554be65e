"""The Discord adapter's settings, checked, and the invite URL they imply."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

import discord

from bot.platform import ConfigError, Settings

__all__ = ["INVITE_PERMISSIONS", "PERMISSION_NAMES", "DiscordOptions", "invite_url"]

# What the bot needs, and nothing more: see the channel, read and answer in channels and
# threads, reply to a message (needs history), and attach the .txt overflow of long replies.
INVITE_PERMISSIONS = discord.Permissions(
    view_channel=True,
    send_messages=True,
    send_messages_in_threads=True,
    read_message_history=True,
    attach_files=True,
)
PERMISSION_NAMES = {
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
    shard_count: int | None = None  # SHARD_COUNT: this process runs shard_ids of them
    shard_ids: tuple[int, ...] = ()  # SHARD_IDS (all when empty)
    backfill_max_messages: int = 500  # per channel after downtime; 0 = no backfill

    @classmethod
    def from_settings(cls, settings: Settings) -> DiscordOptions:
        """Read and check ``DISCORD_*``, ``STREAM_REPLIES`` and ``SHARD_*``; ``ConfigError``
        names the fix."""
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
                   settings.stream_replies, shard_count=settings.shard_count or None,
                   shard_ids=tuple(settings.shard_ids or ()),
                   backfill_max_messages=settings.backfill_max_messages)

    def shards(self) -> dict[str, object]:
        """``shard_count``/``shard_ids`` for the client, when sharding is configured."""
        if not self.shard_count:
            return {}
        # This process runs SHARD_IDS (all when unset) of SHARD_COUNT; spread the rest
        # over other processes sharing the same PostgreSQL.
        out: dict[str, object] = {"shard_count": self.shard_count}
        if self.shard_ids:
            out["shard_ids"] = list(self.shard_ids)
        return out
