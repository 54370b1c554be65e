"""Discord's half of the backfill after downtime (the rules: ``adapters.backfill``).

The gateway never replays what was posted while the bot was away, so on every shard's
READY (start, and a new session after a lost one) and RESUMED, each remembered channel of
the servers on that shard (DMs go with shard 0) is read back with discord.py's own
``channel.history``, which waits out 429s itself:

* ``history(after=<newest stored id>, oldest_first=False, limit=bound)`` reads newest
  first and stops at the first page that reaches back to the stored message, so a short
  gap costs one request and a long one at most ``bound / 100``;
* when that filled the bound, ``history(after=…, before=<oldest kept>, oldest_first=True,
  limit=SKIP_COUNT_LIMIT)`` only counts the older missed messages, for the log.

Messages are translated exactly as live ones (``text.to_incoming``: bots, webhooks and
system messages are not conversation), their authors' roles asked of Discord (REST messages
carry no member object), and handed to ``ChatService.backfilled``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import discord

from adapters.backfill import SKIP_COUNT_LIMIT, Backfiller, Fetched, HistoryStore
from adapters.discord.text import role_ids, to_incoming
from bot.platform import ChannelKey, ChatService

__all__ = ["discord_backfiller", "snowflake_order"]

log = logging.getLogger(__name__)


async def _roles(channel: Any, messages: list[discord.Message]) -> dict[str, tuple[str, ...]]:
    """The roles of the people who wrote ``messages`` that discord.py has no member object
    of (messages read over REST carry none), asked of Discord once per author: the access
    lists' role rules apply to what is read back as to live messages. Someone who left the
    server holds none; a lookup that fails leaves them without (as before it was asked)."""
    guild = getattr(channel, "guild", None)
    if guild is None:
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for author in {m.author.id: m.author for m in messages}.values():
        if isinstance(author, discord.Member) or author.bot:
            continue
        member = guild.get_member(author.id)
        if member is None:
            try:
                member = await guild.fetch_member(author.id)
            except discord.NotFound:
                member = None
            except discord.HTTPException as e:
                log.info("backfill: could not read the roles of %s (%s)", author.id, e)
                continue
        found[str(author.id)] = role_ids(member) if member is not None else ()
    return found


def snowflake_order(message_id: str) -> tuple[int, ...] | None:
    """Discord ids are snowflakes: numeric order is time order."""
    return (int(message_id),) if message_id.isdigit() else None


def _owns_shard(client: discord.AutoShardedClient, shard_id: int) -> bool:
    return client.shard_ids is None or shard_id in client.shard_ids


def _channel(client: discord.AutoShardedClient, key: ChannelKey) -> Any | None:
    """The messageable for ``key`` if this process serves it (its shard), else None."""
    if not key.channel.isdigit():
        return None
    cid = int(key.channel)
    if key.workspace == "dm":
        if not _owns_shard(client, 0):
            return None
        return client.get_channel(cid) or client.get_partial_messageable(
            cid, type=discord.ChannelType.private)
    guild = client.get_guild(int(key.workspace)) if key.workspace.isdigit() else None
    if guild is None:
        return None  # another process's shard, or the bot left the server
    # An archived thread is not cached; a partial channel still reads its history.
    return guild.get_channel_or_thread(cid) or client.get_partial_messageable(
        cid, guild_id=guild.id)


def on_shard(client: discord.AutoShardedClient, shard_id: int) -> Callable[[ChannelKey], bool]:
    """A filter: the channels whose events arrive on ``shard_id`` (DMs: shard 0)."""

    def accepts(key: ChannelKey) -> bool:
        if key.workspace == "dm":
            return shard_id == 0
        guild = client.get_guild(int(key.workspace)) if key.workspace.isdigit() else None
        return guild is not None and guild.shard_id == shard_id

    return accepts


def discord_backfiller(client: discord.AutoShardedClient, service: ChatService,
                       store: HistoryStore, bound: int) -> Backfiller:
    """The backfill of ``client``'s channels (``bound`` per channel; 0 = off)."""

    async def fetch(key: ChannelKey, after_id: str, limit: int) -> Fetched | None:
        channel = _channel(client, key)
        if channel is None or client.user is None:
            return None
        after = discord.Object(int(after_id))
        try:
            newest = [m async for m in channel.history(limit=limit, after=after,
                                                      oldest_first=False)]
            skipped = 0
            if len(newest) >= limit:
                older = channel.history(limit=SKIP_COUNT_LIMIT, after=after,
                                        before=newest[-1], oldest_first=True)
                skipped = sum([1 async for _ in older])
        except discord.Forbidden:
            log.warning("backfill: no permission to read the history of channel %s; grant "
                        "the bot 'Read Message History' there", key.channel)
            return None
        except discord.NotFound:
            log.info("backfill: channel %s no longer exists", key.channel)
            return None
        bot_id = client.user.id
        messages = [m for m in (to_incoming(x, bot_id) for x in reversed(newest)) if m]
        roles = await _roles(channel, newest)
        messages = [replace(m, roles=roles.get(m.author_id, m.roles)) for m in messages]
        return Fetched(messages, skipped, skipped >= SKIP_COUNT_LIMIT)

    return Backfiller("discord", service, store, fetch, snowflake_order, bound=bound)
