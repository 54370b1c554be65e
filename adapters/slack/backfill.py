"""Slack's half of the backfill after downtime (the rules: ``adapters.backfill``).

Slack stops re-delivering an event after its retries, so on start (HTTP mode) and on every
Socket Mode connection (start and each reconnect), each remembered channel of this
workspace is read back from the newest stored ``ts``:

* ``conversations.history(oldest=<ts>)``, newest first, paged by cursor until the bound is
  filled (and then on, up to ``SKIP_COUNT_LIMIT`` more, only to count what is skipped);
* ``conversations.replies(ts=<parent>, oldest=<ts>)`` for every thread with a reply newer
  than the stored ``ts`` (``latest_reply``): threads started in the gap, and threads
  among the ``THREAD_LOOKBACK`` messages before it (Slack has no "threads with new
  replies" query; an older thread's new replies are found when its next live reply or
  mention comes, or not at all).

Messages of both go through the live path's translation (``text.to_incoming``, names from
the user directory) to ``ChatService.backfilled``. Rate limits: the bot's Web API client
waits out a 429's ``Retry-After`` (up to three times, ``web.make_web_client``); a channel
still refused is left for the next start or reconnect, with nothing of it recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.web.async_client import AsyncWebClient

from adapters.backfill import SKIP_COUNT_LIMIT, Backfiller, Fetched, HistoryStore
from adapters.slack.text import is_conversation, mentioned_users, to_incoming
from adapters.slack.users import BotIdentity, UserDirectory
from bot.platform import ChannelKey, ChatService, IncomingMessage

__all__ = ["THREAD_LOOKBACK", "slack_backfiller", "trigger_on_reconnect", "ts_order"]

log = logging.getLogger(__name__)

GONE = frozenset({"not_in_channel", "channel_not_found", "is_archived", "thread_not_found"})
THREAD_LOOKBACK = 100  # messages before the stored one whose threads are checked for replies
PAGE = 200  # Slack's recommended page size for history reads
Json = dict[str, Any]


def ts_order(ts: str) -> tuple[int, ...] | None:
    """Slack's ``ts`` (``"1700000000.000100"``) as a sortable pair; None if it is not one."""
    seconds, _, micros = ts.partition(".")
    if not (seconds.isdigit() and micros.isdigit()):
        return None
    return int(seconds), int(micros)


def _newer(ts: Any, after: tuple[int, ...]) -> bool:
    key = ts_order(str(ts or ""))
    return key is not None and key > after


async def _pages(method: Any, cap: int, **params: Any) -> tuple[list[Json], bool]:
    """Up to ``cap`` messages of a paged Slack read; whether more remained."""
    out: list[Json] = []
    cursor = None
    while True:
        r = await method(limit=min(PAGE, cap - len(out)), cursor=cursor, **params)
        out.extend(r.get("messages") or ())
        cursor = (r.get("response_metadata") or {}).get("next_cursor")
        more = bool(r.get("has_more")) and bool(cursor)
        if not more or len(out) >= cap:
            return out, more


def slack_backfiller(client: AsyncWebClient, me: BotIdentity, users: UserDirectory,
                     service: ChatService, store: HistoryStore, bound: int) -> Backfiller:
    """The backfill of the workspace ``me`` is in (``bound`` per channel; 0 = off)."""
    reader = _ChannelReader(client, me, users)
    return Backfiller("slack", service, store, reader.fetch, ts_order, bound=bound)


class _ChannelReader:
    """Reads a channel of ``me``'s workspace back from a stored ``ts``: the messages and
    thread replies newer than it, translated as the live path translates them."""

    def __init__(self, client: AsyncWebClient, me: BotIdentity, users: UserDirectory) -> None:
        self.client = client
        self.me = me
        self.users = users

    async def fetch(self, key: ChannelKey, after: str, limit: int) -> Fetched | None:
        """``key``'s messages after ``after``, at most ``limit``; None for another
        workspace's channel and for one that is gone or that Slack refuses to read."""
        if key.workspace != self.me.team_id or ts_order(after) is None:
            return None  # another workspace's channel
        try:
            return await self._read(key.channel, after, limit)
        except SlackApiError as e:
            error = str(e.response.get("error"))
            if error in GONE:
                log.info("backfill: skipping Slack channel %s (%s)", key.channel, error)
                return None
            if error == "missing_scope":
                log.warning("backfill: Slack refused to read channel %s (missing_scope); add "
                            "the channels:history, groups:history, im:history and "
                            "mpim:history scopes (slack_manifest.yaml) and reinstall the app",
                            key.channel)
                return None
            raise

    async def _read(self, channel: str, after: str, limit: int) -> Fetched:
        """The newest ``limit`` conversation messages after ``after``, and how many older."""
        found, more = await self._newer(channel, after, limit + SKIP_COUNT_LIMIT)
        ordered = sorted((m for m in found if self._wanted(m)),
                         key=lambda m: ts_order(str(m["ts"])) or ())
        kept, skipped = ordered[-limit:], max(0, len(ordered) - limit)
        return Fetched(await self._incoming(channel, kept), skipped, more)

    async def _newer(self, channel: str, after: str, cap: int) -> tuple[list[Json], bool]:
        """Up to ``cap`` messages after ``after``, with the new replies of the threads
        started in the gap or among the ``THREAD_LOOKBACK`` messages before it; whether
        more remained."""
        since = ts_order(after) or ()
        history = self.client.conversations_history
        top, more = await _pages(history, cap, channel=channel, oldest=after)
        before = await history(channel=channel, latest=after, inclusive=True,
                               limit=THREAD_LOOKBACK)
        found = {str(m.get("ts")): m for m in top if _newer(m.get("ts"), since)}
        for parent in [*top, *(before.get("messages") or ())]:
            if parent.get("reply_count") and _newer(parent.get("latest_reply"), since):
                replies, cut = await _pages(self.client.conversations_replies, cap,
                                            channel=channel, ts=parent["ts"], oldest=after)
                more = more or cut
                found |= {str(m.get("ts")): m for m in replies if _newer(m.get("ts"), since)}
        return list(found.values()), more

    def _wanted(self, m: Mapping[str, Any]) -> bool:
        return is_conversation({"type": "message", **m}, self.me.user_id)

    async def _incoming(self, channel: str, kept: Sequence[Json]) -> list[IncomingMessage]:
        """``kept`` as the live path translates them, with their authors' and mentioned
        people's names; a late answer (a young mention) goes to its thread."""
        me = self.me
        ids = {str(m["user"]) for m in kept}
        ids |= {u for m in kept for u in mentioned_users(str(m.get("text") or ""))}
        names = await self.users.names(i for i in ids if i != me.user_id)
        names[me.user_id] = me.name
        messages = []
        for m in kept:
            msg = to_incoming(me.team_id, {"type": "message", **m, "channel": channel},
                              bot_user_id=me.user_id, names=names)
            if msg is not None:
                messages.append(replace(msg, route=str(m.get("thread_ts") or m["ts"])))
        return messages


async def trigger_on_reconnect(socket: AsyncBaseSocketModeClient, backfill: Backfiller) -> None:
    """Backfill after every new Socket Mode session (its ``hello``) other than the one
    open now, whose start the caller backfills."""
    first = await socket.session_id()

    async def on_message(client: AsyncBaseSocketModeClient, message: Json, raw: str) -> None:
        if message.get("type") == "hello" and await client.session_id() != first:
            backfill.trigger("socket reconnected")

    socket.message_listeners.append(on_message)  # type: ignore[arg-type]
