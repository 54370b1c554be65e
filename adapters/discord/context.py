"""What a command run from a Discord interaction is told (``bot.commands.declare.Context``):
the channel, the member, and Discord's permissions behind gistbot's.

``MODERATE`` (``/reset``, ``/forget``) is ``DISCORD_RESET_PERMISSION`` (Manage Messages by
default), ``MANAGE_CHANNEL`` (digests, a channel's settings) Manage Channels and
``MANAGE_SERVER`` (a server's settings) Manage Server; Administrator has them all, and in
a direct message everyone has them (``/config`` refuses changes there by itself).
"""

from __future__ import annotations

import discord

from adapters.discord.access import ChannelAudience, MemberAccess
from adapters.discord.catchup import where
from adapters.discord.text import channel_key, parent_of, role_ids
from bot.platform import Access, Features, Permission, Registry, Where

__all__ = ["DiscordContext", "discord_permission", "rights"]


def discord_permission(permission: Permission, moderate: str) -> str:
    """The ``discord.Permissions`` flag behind ``permission`` ("" for everyone);
    ``moderate``: the configured flag for ``MODERATE``."""
    return {Permission.EVERYONE: "", Permission.MODERATE: moderate,
            Permission.MANAGE_CHANNEL: "manage_channels",
            Permission.MANAGE_SERVER: "manage_guild"}[permission]


def _title(flag: str) -> str:
    return "Manage Server" if flag == "manage_guild" else flag.replace("_", " ").title()


def rights(in_guild: bool, perms: discord.Permissions) -> tuple[bool, bool]:
    """(may change this channel's settings, may change the server's)."""
    if not in_guild:
        return False, False
    admin = perms.administrator
    return admin or perms.manage_channels, admin or perms.manage_guild


class DiscordContext:
    """One interaction, as a running command sees it."""

    def __init__(self, interaction: discord.Interaction, features: Features,
                 commands: Registry, moderate: str) -> None:
        self.interaction, self.features, self.commands = interaction, features, commands
        self.moderate = moderate
        self.key = channel_key(interaction.guild_id, interaction.channel_id or 0)
        self.user_id = str(interaction.user.id)
        self.is_direct = interaction.guild_id is None
        self.roles: tuple[str, ...] | None = role_ids(interaction.user)
        self.parent = parent_of(interaction.channel)

    async def user_name(self) -> str:
        return self.interaction.user.display_name

    def reader(self) -> Access:
        return MemberAccess(self.interaction)

    def everyone(self) -> Access:
        i = self.interaction
        return ChannelAudience(i.client, i.guild_id, i.channel_id or 0)

    async def where(self) -> Where:
        i = self.interaction
        return where(i.client, i.guild_id, i.channel_id or 0, self.reader(), i.locale.value)

    async def may(self, permission: Permission) -> bool:
        flag = discord_permission(permission, self.moderate)
        perms = self.interaction.permissions
        return not flag or self.is_direct or perms.administrator or bool(getattr(perms, flag))

    def refusal(self, permission: Permission, action: str) -> str:
        flag = discord_permission(permission, self.moderate)
        return f"You need the {_title(flag)} permission to {action}."

    def who(self, permission: Permission) -> str:
        flag = discord_permission(permission, self.moderate)
        if not flag:
            return "anyone"
        return f"members with {_title(flag)} (or Administrator; anyone in a direct message)"

    def readable(self, text: str) -> str:
        return text
