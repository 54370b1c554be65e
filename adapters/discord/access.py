"""What Discord tells about one member's access, for ``bot.catchup.visibility`` (``Access``).

A slash command carries the member's resolved permissions in the channel it was used in
(``Interaction.permissions``, overwrites included). A thread's permissions are its parent
channel's, so they answer for the channel and its threads; any other channel is not
vouched for. Membership of a private thread is asked of Discord (``Get Thread Member``:
404 when the user is not a member); when that call fails the answer is "no".
"""

from __future__ import annotations

import logging

import discord

from memory.models import ChannelKey

__all__ = ["MemberAccess"]

log = logging.getLogger(__name__)


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
