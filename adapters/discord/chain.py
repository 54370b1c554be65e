"""Discord reply chains: which messages a reply answers, back up the chain.

A Discord reply references one message (``message.reference``), which may reference
another, and so on. ``ReplyChains.source`` gives the service a ``ChainSource`` that walks
that chain when a reply is composed, nearest first, each link found the cheapest way:

1. the message object discord.py already has: the reference's ``resolved`` message (Discord
   sends it with the reply), else the one in discord.py's message cache;
2. the links this process has seen (``note``: every message's id and the id it replies
   to): the link is handed over by id, and the service reads its text from storage, where
   every recorded message is;
3. ``fetch_message``, at most ``fetches`` calls a chain, each bounded by ``fetch_timeout``.

A chain stays in its channel (a reference into another channel ends it, so nobody is
shown a message of a channel they may not read), is at most ``depth`` messages long, and
ends without error at a deleted message (404), a refused or slow fetch, or a link that
cannot be followed further.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import discord

from adapters.discord.text import message_text
from bot.platform import ChainLink, ChainSource

__all__ = ["ReplyChains"]

log = logging.getLogger(__name__)

DEPTH = 25
"""Messages a chain shows at most (llmcord's default conversation length)."""
FETCHES = 3
"""``fetch_message`` calls one reply may make for its chain."""
FETCH_TIMEOUT = 5.0
"""Seconds one fetch may take before the chain ends there."""
LINKS = 50_000
"""Messages whose reference this process remembers (ids only: a few MB)."""


def _reference(message: discord.Message) -> int | None:
    """The id of the message ``message`` replies to in its own channel, else None."""
    ref = message.reference
    if ref is None or ref.message_id is None or ref.type is not discord.MessageReferenceType.reply:
        return None
    if ref.channel_id != message.channel.id:
        return None  # a chain stays in its channel
    return ref.message_id


def _known(message: discord.Message) -> discord.Message | None:
    """The message ``message`` replies to, if discord.py has it already."""
    ref = message.reference
    if ref is None:
        return None
    if isinstance(ref.resolved, discord.Message):
        return ref.resolved
    return ref.cached_message


class ReplyChains:
    """Reads reply chains for one client (see the module docstring)."""

    def __init__(self, cached: Callable[[int], discord.Message | None] = lambda _: None, *,
                 depth: int = DEPTH, fetches: int = FETCHES,
                 fetch_timeout: float = FETCH_TIMEOUT, links: int = LINKS) -> None:
        self.cached = cached  # discord.py's message cache, by id
        self.depth = depth
        self.fetches = fetches
        self.fetch_timeout = fetch_timeout
        self._limit = links
        self._parents: OrderedDict[int, tuple[int | None, bool]] = OrderedDict()

    def note(self, message: discord.Message, own_id: int) -> None:
        """Remember what ``message`` replies to (and whether the bot wrote it)."""
        self._parents[message.id] = (_reference(message), message.author.id == own_id)
        self._parents.move_to_end(message.id)
        while len(self._parents) > self._limit:
            self._parents.popitem(last=False)

    def source(self, message: discord.Message, own_id: int) -> ChainSource | None:
        """The ``ChainSource`` of ``message`` (None when it replies to nothing here)."""
        if _reference(message) is None:
            return None

        async def read() -> tuple[ChainLink, ...]:
            return await self.walk(message, own_id)

        return read

    async def walk(self, message: discord.Message, own_id: int) -> tuple[ChainLink, ...]:
        """The chain above ``message``, nearest first (see the module docstring)."""
        links: list[ChainLink] = []
        fetches = self.fetches
        child: discord.Message | None = message
        parent_id = _reference(message)
        while parent_id is not None and len(links) < self.depth:
            found = _known(child) if child is not None else None
            if found is None or found.id != parent_id:
                found = self.cached(parent_id)
            seen = self._parents.get(parent_id)
            if found is None and seen is not None and not seen[1]:
                # a person's message this process saw: storage has its text
                links.append(ChainLink(str(parent_id)))
                child, parent_id = None, seen[0]
                continue
            if found is None and fetches > 0:
                fetches -= 1
                found, gone = await self._fetch(message.channel, parent_id)
                if gone:
                    break
            if found is None:  # not at hand: storage may still have it; the chain ends
                links.append(ChainLink(str(parent_id)))
                break
            links.append(ChainLink(str(found.id), found.author.display_name,
                                   message_text(found), found.created_at.timestamp(),
                                   own=found.author.id == own_id))
            child, parent_id = found, _reference(found)
        return tuple(links)

    async def _fetch(self, channel: Any, message_id: int
                     ) -> tuple[discord.Message | None, bool]:
        """(the message, None) or (None, whether it is gone: deleted or never there)."""
        try:
            async with asyncio.timeout(self.fetch_timeout):
                return await channel.fetch_message(message_id), False
        except discord.NotFound:
            return None, True
        except Exception as e:  # refused, limited, slow, reset: the chain ends there
            log.info("could not read message %s of a reply chain in %s (%s); the chain "
                     "ends there", message_id, getattr(channel, "id", "?"), type(e).__name__)
            return None, False
