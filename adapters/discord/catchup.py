"""Discord's side of ``/catchup`` and ``/digest``: a channel's threads, jump-URL links and
the digest ``Outlet`` that posts in a channel (the commands themselves are generated from
the registry: ``adapters.discord.commands``).

A Discord thread is a channel of its own in memory, so a catch-up of a channel also reads
the threads of it that the client knows (active threads of the guild whose parent is the
channel) that its audience may read: the private ones are marked, and a command hands the
member's access (``adapters.discord.access``) for ``bot.catchup.visibility`` to decide. Links
are jump URLs, ``https://discord.com/channels/<guild>/<channel>/<message>`` (a thread's
messages under the thread's id), built from the stored ids.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

import discord

from adapters.discord.access import ChannelAudience
from adapters.discord.outlet import DiscordPosts
from adapters.discord.text import channel_key, parent_of, plan_reply
from bot.platform import (
    Access,
    ChannelKey,
    Features,
    Outbox,
    Post,
    Turn,
    Where,
    digest_id,
)

__all__ = ["DiscordOutlet", "discord_link", "register_outlet", "where"]

log = logging.getLogger(__name__)
OPEN_THREADS = frozenset({discord.ChannelType.public_thread, discord.ChannelType.news_thread})


def discord_link(turn: Turn) -> str:
    """The jump URL of a stored Discord message (threads are channels, DMs are ``@me``)."""
    guild = "@me" if turn.key.workspace == "dm" else turn.key.workspace
    return f"https://discord.com/channels/{guild}/{turn.key.channel}/{turn.message_id}"


async def jump_links(turns: Sequence[Turn]) -> Mapping[Turn, str]:
    """Jump URLs of stored Discord messages."""
    return {t: discord_link(t) for t in turns}


def where(client: discord.Client, guild_id: int | None, channel_id: int,
          reader: Access | None = None, locale: str | None = None) -> Where:
    """The channel and its known threads (the private ones marked), with jump-URL links;
    ``reader``: the access of the member asking, if one is; ``locale``: their client's;
    what everyone who can see a post there may read (``ChannelAudience``)."""
    threads: dict[ChannelKey, str] = {}
    private: set[ChannelKey] = set()
    guild = client.get_guild(guild_id) if guild_id else None
    if guild is not None:
        for thread in guild.threads:
            if thread.parent_id == channel_id:
                key = channel_key(guild_id, thread.id)
                threads[key] = thread.name
                if thread.type not in OPEN_THREADS:
                    private.add(key)  # private (or of an unknown kind): members only
    return Where(channel_key(guild_id, channel_id), threads, jump_links, frozenset(private),
                 reader, locale, ChannelAudience(client, guild_id, channel_id),
                 parent_of(client.get_channel(channel_id)), direct=guild_id is None,
                 roles=() if guild_id is None else None)  # nobody has roles in a DM


class DiscordOutlet:
    """Where scheduled digests go on Discord (``bot.catchup.digests.Outlet``), through the
    outbox."""

    def __init__(self, client: discord.Client, outbox: Outbox | None = None, *,
                 timeout: float = 30.0) -> None:
        self.client = client
        self.posts = DiscordPosts(client, timeout=timeout)
        self.outbox = outbox or Outbox(None)

    async def where(self, key: ChannelKey) -> Where:
        guild = None if key.workspace == "dm" else int(key.workspace)
        return where(self.client, guild, int(key.channel))

    async def post(self, key: ChannelKey, text: str, *, slot_at: float,
                   in_thread: bool = False) -> None:
        channel = self.client.get_channel(int(key.channel))
        if channel is None:
            channel = await self.client.fetch_channel(int(key.channel))
        if not isinstance(channel, discord.abc.Messageable):
            raise TypeError(f"cannot post in {key}")
        target = key
        if in_thread and isinstance(channel, discord.TextChannel):
            heading, _, text = text.partition("\n")
            first = await self._post(Post(key, digest_id(key, slot_at, -1), heading))
            name = heading.replace("*", "")[:100] or "Digest"
            try:
                thread = await channel.get_partial_message(int(first)).create_thread(name=name)
                target = replace(key, channel=str(thread.id))
            except discord.HTTPException:  # created before a crash: it has the message's id
                target = replace(key, channel=first)
        for i, chunk in enumerate(plan_reply(text.strip()).messages):
            await self._post(Post(target, digest_id(key, slot_at, i), chunk))

    async def _post(self, post: Post) -> str:
        sent = await self.outbox.send(self.posts, post)
        if sent is None:
            raise RuntimeError(f"could not post the digest in {post.key}")
        return sent


def register_outlet(client: discord.Client, features: Features, *,
                    timeout: float = 30.0) -> None:
    """Let the digest scheduler post on Discord through ``client`` (``timeout``: seconds a
    post may take before its outcome is unknown)."""
    if (digests := features.catchup_commands.digests) is not None:
        digests.add_outlet("discord", DiscordOutlet(client, features.outbox, timeout=timeout))
