"""Slack's side of ``/catchup`` and ``/digest``: permalinks, the admin check, and the
digest ``Outlet`` that posts in a channel.

Thread replies are in their channel's memory already, so a catch-up of a channel covers
its threads. A cited message is linked by its permalink from ``chat.getPermalink`` (the
right link for a thread reply too), cached per message; when that call fails, the link is
built from the workspace's URL (``auth.test``): ``<workspace>/archives/<channel>/p<ts>``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.access import ConversationAudience
from adapters.slack.outlet import SlackPosts
from adapters.slack.text import format_reply
from adapters.slack.users import UserDirectory
from adapters.slack.web import call
from bot.platform import ChannelKey, Outbox, Post, Turn, Where, digest_id

__all__ = ["CACHE_SIZE", "Permalinks", "SlackOutlet", "built_permalink"]

log = logging.getLogger(__name__)
CACHE_SIZE = 10_000
PARALLEL = 8

def built_permalink(workspace_url: str, channel: str, ts: str) -> str:
    """A message link from the workspace URL, for when ``chat.getPermalink`` fails."""
    return f"{workspace_url.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"

class Permalinks:
    """``chat.getPermalink`` with a cache, and a built link as the fallback."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self._cache: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._workspace_url: str | None = None
        self._slots = asyncio.Semaphore(PARALLEL)

    async def workspace_url(self) -> str:
        """The workspace's URL from ``auth.test`` (once)."""
        if self._workspace_url is None:
            r = await call("auth.test", self.client.auth_test())
            self._workspace_url = str((r or {}).get("url") or "https://slack.com/")
        return self._workspace_url

    async def link(self, channel: str, ts: str) -> str:
        """The permalink of message ``ts`` in ``channel``."""
        cached = self._cache.get((channel, ts))
        if cached is not None:
            self._cache.move_to_end((channel, ts))
            return cached
        async with self._slots:
            r = await call("chat.getPermalink",
                           self.client.chat_getPermalink(channel=channel, message_ts=ts))
        url = str((r or {}).get("permalink") or "")
        if not url:
            url = built_permalink(await self.workspace_url(), channel, ts)
        else:
            self._cache[(channel, ts)] = url
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return url

    async def __call__(self, turns: Sequence[Turn]) -> Mapping[Turn, str]:
        urls = await asyncio.gather(*(self.link(t.key.channel, t.message_id) for t in turns))
        return dict(zip(turns, urls, strict=True))

class SlackOutlet:
    """Where scheduled digests go on Slack (``bot.catchup.digests.Outlet``), through the outbox."""

    def __init__(self, client: AsyncWebClient, users: UserDirectory,
                 links: Permalinks, outbox: Outbox | None = None) -> None:
        self.client, self.users, self.links = client, users, links
        self.posts = SlackPosts(client)
        self.outbox = outbox or Outbox(None)

    async def where(self, key: ChannelKey) -> Where:
        return Where(key, {}, self.links, everyone=ConversationAudience(key),
                     direct=key.channel.startswith("D"))

    async def post(self, key: ChannelKey, text: str, *, slot_at: float,
                   in_thread: bool = False) -> None:
        thread_ts = ""
        if in_thread:  # the heading in the channel, the digest in its thread
            heading, _, text = text.partition("\n")
            heading = format_reply(heading, self.users.known())[0]
            thread_ts = await self._post(Post(key, digest_id(key, slot_at, -1), heading))
        for i, chunk in enumerate(format_reply(text.strip(), self.users.known())):
            await self._post(Post(key, digest_id(key, slot_at, i), chunk, thread_ts))

    async def _post(self, post: Post) -> str:
        ts = await self.outbox.send(self.posts, post)
        if ts is None:
            raise RuntimeError(f"could not post the digest in {post.key}")
        return ts
