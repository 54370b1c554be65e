"""Slack's outlet for the outbox (``bot.conversation.outbox.PostOutlet``): every message the bot
posts or finishes carries its outbox id in the message ``metadata``, so after a crash the post
is found again in the thread (``conversations.replies``) or the channel
(``conversations.history``), both read with ``include_all_metadata``. A read that fails
(5xx, 429, reset, timeout, after the client's own retries) cannot tell whether the post is
there: ``find`` raises ``OutcomeUnknown`` then, never "not there".

``SlackReplies`` adds what ``bot.conversation.reply_flow`` needs for a reply: the "thinking…"
placeholder, mrkdwn chunks (:mod:`adapters.slack.text`), streamed previews at most once per
``STREAM_INTERVAL`` and ephemeral answers for the author only.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.text import format_reply
from adapters.slack.users import UserDirectory
from adapters.slack.web import UNKNOWN, UNKNOWN_ERRORS, call, respond_once, webhook_client, write
from bot.platform import ChannelKey, ChatSettings, IncomingMessage, OutcomeUnknown, Post

__all__ = ["EVENT_TYPE", "PLACEHOLDER", "AnswerPosts", "SlackPosts", "SlackReplies", "metadata"]

log = logging.getLogger(__name__)
EVENT_TYPE = "gistbot_outbox"
PLACEHOLDER = "_thinking…_"
SEARCH_PAGES = 2  # pages of 100 read to find an earlier post (a thread, or the channel)


def metadata(outbox_id: str) -> dict[str, Any]:
    """The message metadata that carries an outbox id."""
    return {"event_type": EVENT_TYPE, "event_payload": {"outbox_id": outbox_id}}


def carries(message: Mapping[str, Any], outbox_id: str) -> bool:
    """Whether a message read back with its metadata carries ``outbox_id``."""
    meta = message.get("metadata") or {}
    payload = meta.get("event_payload") or {}
    return meta.get("event_type") == EVENT_TYPE and payload.get("outbox_id") == outbox_id


class SlackPosts:
    """Posts, edits, deletes and finds the bot's messages in Slack (text already mrkdwn);
    a write whose outcome is unknown raises ``OutcomeUnknown`` (``adapters.slack.web``)."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def post(self, post: Post) -> str | None:
        channel = post.key.channel
        r = await write(f"chat.postMessage in {channel}", self.client.chat_postMessage(
            channel=channel, thread_ts=post.reply_to or None, text=post.text,
            unfurl_links=False, unfurl_media=False, metadata=metadata(post.outbox_id)))
        return str(r.get("ts")) if r is not None and r.get("ts") else None

    async def edit(self, post: Post, message_id: str) -> bool:
        channel = post.key.channel
        r = await write(f"chat.update in {channel}", self.client.chat_update(
            channel=channel, ts=message_id, text=post.text, metadata=metadata(post.outbox_id)))
        return r is not None

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        r = await write(f"chat.delete in {key.channel}",
                        self.client.chat_delete(channel=key.channel, ts=message_id),
                        gone="message_not_found")
        return r is not None

    async def find(self, post: Post) -> str | None:
        channel, cursor = post.key.channel, None
        for _ in range(SEARCH_PAGES):
            if post.reply_to:
                request = self.client.conversations_replies(
                    channel=channel, ts=post.reply_to, include_all_metadata=True, limit=100,
                    cursor=cursor)
            else:
                request = self.client.conversations_history(
                    channel=channel, include_all_metadata=True, limit=100, cursor=cursor)
            try:
                r = await request
            except SlackApiError as e:
                status, error = e.response.status_code, e.response.get("error")
                if status >= 500 or status == 429 or error in UNKNOWN_ERRORS:
                    raise OutcomeUnknown(f"Slack reading {channel}: HTTP {status} {error}") from e
                log.debug("reading %s for an earlier post: %s", channel, error)
                return None  # e.g. thread_not_found: nothing was posted there
            except UNKNOWN as e:
                raise OutcomeUnknown(f"Slack reading {channel}: {type(e).__name__}") from e
            for m in r.get("messages") or []:
                if carries(m, post.outbox_id):
                    return str(m["ts"])
            cursor = (r.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return None
        return None


class AnswerPosts(SlackPosts):
    """A command's public answer, posted to its ``response_url`` in the channel with its
    outbox id in the metadata, and found again in the channel like any post. (Slack gives
    such a post no ``ts``: the id recorded is the empty string.)"""

    def __init__(self, client: AsyncWebClient, response_url: str, *,
                 timeout: float = 30.0) -> None:
        super().__init__(client)
        self.hook = webhook_client(response_url, timeout=timeout)

    async def post(self, post: Post) -> str | None:
        sent = await respond_once(f"response_url in {post.key.channel}", self.hook.send(
            text=post.text, response_type="in_channel", metadata=metadata(post.outbox_id)))
        return "" if sent else None

    async def edit(self, post: Post, message_id: str) -> bool:
        return False  # an answer is posted once, never changed

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        return False


class SlackReplies(SlackPosts):
    """``bot.conversation.reply_flow.ReplyOutlet`` for Slack: replies go in the message's thread."""

    placeholder = PLACEHOLDER

    def __init__(self, client: AsyncWebClient, chat: ChatSettings,
                 users: UserDirectory) -> None:
        super().__init__(client)
        self.users = users
        self.stream_interval = chat.stream_interval if chat.stream_replies else None

    def split(self, text: str) -> tuple[list[str], str]:
        return format_reply(text, self.users.known()), ""

    def preview(self, text: str) -> str:
        return f"{(format_reply(text, self.users.known()) or [''])[0]} …"

    async def whisper(self, msg: IncomingMessage, text: str) -> None:
        channel = msg.key.channel
        await call(f"chat.postEphemeral in {channel}", self.client.chat_postEphemeral(
            channel=channel, user=msg.author_id, text=text,
            thread_ts=msg.route or msg.message_id))

    @contextlib.asynccontextmanager
    async def working(self, key: ChannelKey) -> AsyncIterator[None]:
        yield  # the placeholder says it
