"""What Discord tells about who may read a channel's history, for the read check
(``bot.read_check.Access``): View Channel and Read Message History.

``MemberAccess``: a slash command carries the member's resolved permissions in the channel
it was used in (``Interaction.permissions``: Discord's own resolution, role and member
overwrites included). A thread's permissions are its parent channel's, so they answer for
the channel and its threads; any other channel is not vouched for. Membership of a private
thread is asked of Discord (``Get Thread Member``: 404 when the user is not a member); when
that call fails the answer is "no".

``reads_history``: the same for a message's author, from the member and channel at hand.

``ChannelAudience``: everyone who can see a post in a channel. Members are not all known
(no member list is fetched), so the answer is read from the channel's permissions, as
``GuildChannel.permissions_for`` resolves them: every member who can view the channel can
read its history when @everyone can (the server's @everyone permissions with the channel's
@everyone overwrite) and no role or member overwrite there denies Read Message History —
whatever roles a member holds, their permissions start from @everyone's and only an
overwrite can take a permission away. Anything else (a role denied the history, a channel
not in the client's cache) is "not everyone".
"""

from __future__ import annotations

import logging

import discord

from bot.platform import ChannelKey

__all__ = ["ChannelAudience", "MemberAccess", "reads_history"]

log = logging.getLogger(__name__)


def reads_history(channel: object, author: discord.abc.User | None) -> bool:
    """Whether the author of a message in ``channel`` may read its history: View Channel
    and Read Message History, as ``permissions_for`` resolves them from the server's roles
    and the channel's overwrites (a thread: its parent's), with no call to Discord. In a
    DM, yes; a server's channel discord.py does not know, or an author it has no member
    object of (who left, say): no."""
    if not isinstance(channel, discord.abc.GuildChannel | discord.Thread):
        return getattr(channel, "guild_id", None) is None  # a DM (a partial one in a server: no)
    if not isinstance(author, discord.Member):
        return False
    perms = channel.permissions_for(author)
    return perms.view_channel and perms.read_message_history


class MemberAccess:
    """The access of the member who used a slash command (``bot.catchup.visibility.Access``)."""

    def __init__(self, interaction: discord.Interaction) -> None:
        self.client = interaction.client
        self.guild_id = interaction.guild_id
        self.channel_id = interaction.channel_id
        self.user_id = interaction.user.id
        self.permissions = interaction.permissions

    def _thread(self, key: ChannelKey) -> discord.Thread | None:
        guild = self.client.get_guild(self.guild_id) if self.guild_id else None
        return guild.get_thread(int(key.channel)) if guild is not None else None

    async def can_read(self, key: ChannelKey) -> bool:
        """View Channel and Read Message History in the command's channel (a thread of it
        inherits them); in a DM, only the DM itself."""
        if self.guild_id is None:
            return key.channel == str(self.channel_id)
        if key.channel != str(self.channel_id):
            thread = self._thread(key)
            if thread is None or thread.parent_id != self.channel_id:
                return False  # not a thread of the command's channel: cannot tell
        return self.permissions.view_channel and self.permissions.read_message_history

    async def is_member(self, key: ChannelKey) -> bool:
        """Whether Discord lists the member in thread ``key``'s members."""
        thread = self._thread(key)
        if thread is None:
            return False
        try:
            await thread.fetch_member(self.user_id)
        except discord.NotFound:
            return False
        except discord.HTTPException as e:
            log.warning("could not check membership of thread %s: %s", thread.id, e)
            return False
        return True


class ChannelAudience:
    """Everyone who can see a post in channel ``channel_id`` (``bot.read_check.Access``):
    they may read a channel (or thread) only if it is that channel or a thread beside it
    and every member who can view it may read its history (see the module docstring)."""

    def __init__(self, client: discord.Client, guild_id: int | None, channel_id: int) -> None:
        self.client, self.guild_id, self.channel_id = client, guild_id, channel_id

    def _base(self, guild: discord.Guild, channel_id: int) -> discord.abc.GuildChannel | None:
        """The channel whose permissions ``channel_id`` has (a thread: its parent)."""
        found = guild.get_channel_or_thread(channel_id)
        if isinstance(found, discord.Thread):
            return found.parent
        return found

    async def can_read(self, key: ChannelKey) -> bool:
        if self.guild_id is None:  # a DM: whoever sees the post is in it
            return key.channel == str(self.channel_id)
        guild = self.client.get_guild(self.guild_id)
        if guild is None or not key.channel.isdigit():
            return False
        base = self._base(guild, int(key.channel))
        home = self._base(guild, self.channel_id)
        if base is None or home is None or base.id != home.id:
            return False
        return history_open(guild, base)

    async def is_member(self, key: ChannelKey) -> bool:
        """Everyone is never the member list of a private thread."""
        return False


def history_open(guild: discord.Guild, channel: discord.abc.GuildChannel) -> bool:
    """Whether every member who can view ``channel`` may read its history."""
    if not channel.permissions_for(guild.default_role).read_message_history:
        return False
    return not any(overwrite.read_message_history is False
                   for target, overwrite in channel.overwrites.items()
                   if target != guild.default_role)
