"""Visibility: which channels' messages an answer may include, decided here once.

A catch-up or a digest of a channel reads more than the channel: on Discord, its threads
(channels of their own in memory). Whoever will read the answer must be able to read every
message it rests on, so before anything is gathered the candidate channels pass ``visible``:

- **A person** (a private ``/catchup``) sees the channel and its threads only if they can
  read them (Discord: View Channel and Read Message History there), and a *private* thread
  only if they are one of its members. Whatever the platform cannot confirm is left out.
- **A public post** (a digest, scheduled or ``/digest now``; a ``public`` catch-up) is read
  by everyone who can see the channel it is posted in, so it never includes a private
  thread, whoever asked, and includes a channel or thread only if everyone who can see the
  post may read its history (``everyone``); the person who asked must still be able to read
  the rest.

The adapter says which threads are private and hands an ``Access`` (``bot.read_check``, the
one read check) for the person asking and one for everyone who can see a post: plain
answers, never a platform object. Recall in replies needs no rule here: memory is kept per
channel and a thread is a channel, so a reply only ever reads the memory of the channel it
is in (a thread's reply never recalls its parent channel, nor the channel its threads).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from bot.read_check import Access
from memory.models import ChannelKey

__all__ = ["Access", "Audience", "visible"]


@dataclass(frozen=True, slots=True)
class Audience:
    """Who will read an answer: the person asking (``reader``, when the platform can say
    what they may read) and, when ``public``, everyone who can see the channel
    (``everyone``: what they may read, when the platform can say)."""

    reader: Access | None = None
    public: bool = False
    everyone: Access | None = None


async def visible(audience: Audience, channel: ChannelKey, threads: Iterable[ChannelKey],
                  private: Collection[ChannelKey]) -> frozenset[ChannelKey]:
    """The keys among ``channel`` and its ``threads`` whose messages ``audience`` may read
    (``private``: the threads only their members may read). Without ``channel`` itself the
    answer must be a refusal, not a partial catch-up."""
    reader = audience.reader

    async def allowed(key: ChannelKey) -> bool:
        if key in private and key != channel:
            if audience.public or reader is None or not await reader.is_member(key):
                return False
        if reader is not None and not await reader.can_read(key):
            return False
        everyone = audience.everyone
        return not audience.public or everyone is None or await everyone.can_read(key)

    keys = list(dict.fromkeys([channel, *threads]))
    verdicts = await asyncio.gather(*(allowed(k) for k in keys))
    return frozenset(k for k, ok in zip(keys, verdicts, strict=True) if ok)
