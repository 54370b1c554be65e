"""Slack threads as reply chains: a message in a thread replies to the thread's earlier
messages, and those go into its prompt as the conversation being replied to.

A thread's messages belong to their channel's memory, so in a busy channel the thread's
first messages leave the recent turns while the thread goes on. ``thread_chain`` gives the
service a ``ChainSource`` that reads the thread once (``conversations.replies`` up to the
message, ``THREAD_WITHIN`` seconds at most) when the reply is composed: the people's
messages by id (the service reads them from storage, where every recorded message is),
the bot's own with their text (stored under another id). The newest ``DEPTH`` before the
message are kept; a thread that cannot be read gives no chain, and the reply still comes.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.users import BotIdentity
from bot.platform import ChainLink, ChainSource

__all__ = ["DEPTH", "THREAD_WITHIN", "thread_chain"]

log = logging.getLogger(__name__)

DEPTH = 25
"""Thread messages a chain shows at most (as on Discord)."""
THREAD_WITHIN = 5.0
"""Seconds reading the thread may take before the reply goes without it."""
PAGE = 200
"""Messages one ``conversations.replies`` call asks for (Slack's page, at most 1,000)."""


def thread_chain(client: AsyncWebClient, me: BotIdentity, event: Any) -> ChainSource | None:
    """The chain of a message in a thread (None for a message that is not a reply)."""
    channel, ts = str(event["channel"]), str(event["ts"])
    thread = str(event.get("thread_ts") or "")
    if not thread or thread == ts:
        return None

    async def read() -> tuple[ChainLink, ...]:
        try:
            async with asyncio.timeout(THREAD_WITHIN):
                r = await client.conversations_replies(channel=channel, ts=thread, latest=ts,
                                                       inclusive=False, limit=PAGE)
        except Exception as e:  # a refused, limited or slow read: the reply goes without
            log.info("could not read thread %s in %s (%s); answering without it", thread,
                     channel, type(e).__name__)
            return ()
        before = [m for m in r.get("messages") or [] if _before(m, ts)]
        return tuple(_link(m, me) for m in reversed(before[-DEPTH:]))

    return read


def _before(m: Any, ts: str) -> bool:
    try:
        return float(m["ts"]) < float(ts)
    except (KeyError, TypeError, ValueError):
        return False


def _link(m: Any, me: BotIdentity) -> ChainLink:
    ts = str(m["ts"])
    if m.get("bot_id") == me.bot_id or m.get("user") == me.user_id:
        return ChainLink(ts, me.name, str(m.get("text") or ""), float(ts), own=True)
    return ChainLink(ts)
