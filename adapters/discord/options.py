"""The Discord adapter's settings (``Settings.discord``) checked, and the invite URL."""

from __future__ import annotations

from urllib.parse import urlencode

import discord

from bot.platform import ConfigError, DiscordSettings, Settings

__all__ = ["INVITE_PERMISSIONS", "PERMISSION_NAMES", "checked", "guild_ids", "invite_url",
           "reset_permission", "shards", "token"]

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


def checked(settings: Settings) -> Settings:
    """``settings`` once its ``discord`` section passes what only the adapter can check
    (the token is set, server ids are numbers, the permission exists); ``ConfigError``
    names the fix."""
    section = settings.discord
    if section.discord_token is None:
        raise ConfigError("DISCORD_TOKEN is not set: copy the bot token from the Discord "
                          "Developer Portal (Bot → Reset Token) into .env")
    guild_ids(section)
    reset_permission(section)
    return settings


def token(section: DiscordSettings) -> str:
    """``DISCORD_TOKEN``, revealed for the login."""
    if section.discord_token is None:
        raise ConfigError("DISCORD_TOKEN is not set")
    return section.discord_token.get_secret_value()


def guild_ids(section: DiscordSettings) -> tuple[int, ...]:
    """``DISCORD_GUILD_IDS`` as numbers."""
    try:
        return tuple(int(g) for g in section.discord_guild_ids)
    except ValueError:
        raise ConfigError("DISCORD_GUILD_IDS must be comma-separated server ids (numbers; "
                          "Developer Mode → right-click the server → Copy Server ID)") from None


def reset_permission(section: DiscordSettings) -> str:
    """``DISCORD_RESET_PERMISSION``, a Discord permission name."""
    perm = section.discord_reset_permission.strip().lower()
    if perm not in discord.Permissions.VALID_FLAGS:
        raise ConfigError(f"DISCORD_RESET_PERMISSION: {perm!r} is not a Discord permission; "
                          "use a name such as manage_messages or administrator")
    return perm


def shards(section: DiscordSettings) -> dict[str, object]:
    """``shard_count``/``shard_ids`` for the client, when sharding is configured."""
    if not section.shard_count:
        return {}
    # This process runs SHARD_IDS (all when unset) of SHARD_COUNT; spread the rest
    # over other processes sharing the same PostgreSQL.
    out: dict[str, object] = {"shard_count": section.shard_count}
    if section.shard_ids:
        out["shard_ids"] = list(section.shard_ids)
    return out
