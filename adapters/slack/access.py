"""Who may read a Slack conversation's history, for the read check
(``bot.read_check.Access``): its members.

Slack shows a conversation's history to its members, and a slash command says only who
asked and where, so ``SlackMember`` asks Slack whether the caller is a member
(``conversations.members``, paged); when Slack does not answer, the answer is "no". A
public channel can also be previewed by people who never joined it; gistbot does not show
them its memory. Everyone who can see a post in a conversation is a member of it, so
``ConversationAudience`` may read that conversation and no other.
"""

from __future__ import annotations

import logging

from slack_sdk.web.async_client import AsyncWebClient

from bot.platform import ChannelKey

__all__ = ["MAX_PAGES", "PAGE", "ConversationAudience", "SlackMember"]

log = logging.getLogger(__name__)
PAGE = 200  # conversations.members: Slack recommends at most 200 a page (limit < 1000)
MAX_PAGES = 500  # past 100,000 members, "not a member" (asked no further)


class SlackMember:
    """The person who used a slash command (``bot.read_check.Access``); one per command, so
    Slack is asked once per conversation per command and again for the next one."""

    def __init__(self, client: AsyncWebClient, user_id: str) -> None:
        self.client, self.user_id = client, user_id
        self._known: dict[ChannelKey, bool] = {}

    async def can_read(self, key: ChannelKey) -> bool:
        """Whether Slack lists the person among conversation ``key``'s members."""
        if key not in self._known:
            self._known[key] = await self._listed(key)
        return self._known[key]

    async def _listed(self, key: ChannelKey) -> bool:
        if not self.user_id:  # a payload without a user (crafted) is nobody's
            return False
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            try:
                page = await self.client.conversations_members(channel=key.channel,
                                                               limit=PAGE, cursor=cursor)
            except Exception as e:
                log.warning("could not check membership of %s: %s", key.channel, e)
                return False
            if self.user_id in (page.get("members") or ()):
                return True
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None:
                return False
        return False

    async def is_member(self, key: ChannelKey) -> bool:
        """Slack has no private threads: membership of the conversation."""
        return await self.can_read(key)


class ConversationAudience:
    """Everyone who can see a post in conversation ``key``: its members, who may read its
    history and nothing else."""

    def __init__(self, key: ChannelKey) -> None:
        self.key = key

    async def can_read(self, key: ChannelKey) -> bool:
        return key == self.key

    async def is_member(self, key: ChannelKey) -> bool:
        return False
