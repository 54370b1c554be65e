"""The Slack adapter (slack-bolt), as a package whose files name its parts.

- ``text``: Slack events in (``to_incoming``), mrkdwn out (pure).
- ``options``: ``SlackOptions`` from ``Settings``.
- ``users``: the bot's identity and the cached user directory.
- ``events``: messages, mentions, edits and deletions; placeholders and replies.
- ``commands``: the slash commands, through one handler.
- ``app``: ``SlackAdapter`` (acknowledge after commit, reply after) and ``build_app``.
- ``web`` and ``transport``: the Web API client; HTTP mode (checked in front of bolt:
  size, signature, form) and Socket Mode.
- ``backfill``: reading back what was missed while the bot was away.
- ``launch``: ``serve``.

Importing this package does not import slack-bolt (an extra: ``gistbot[slack]``);
``run_slack`` does, and raises ``ConfigError`` naming the extra when it is missing.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from adapters.claims import DeliveryClaims
from bot.errors import ConfigError
from bot.service import ChatService
from bot.settings import Settings

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

    from adapters.backfill import HistoryStore

__all__ = ["run_slack"]

_LIBRARIES = frozenset({"slack_bolt", "slack_sdk", "aiohttp"})


async def run_slack(
    service: ChatService,
    settings: Settings,
    claims: DeliveryClaims,
    *,
    client: AsyncWebClient | None = None,
    stop: asyncio.Event | None = None,
    history: HistoryStore | None = None,
) -> None:
    """Serve Slack for ``service`` with the ``SLACK_*`` settings until cancelled (or ``stop``);
    with ``history`` (the store) missed messages are backfilled after downtime."""
    try:
        from adapters.slack.launch import serve
        from adapters.slack.options import SlackOptions
    except ImportError as e:
        if (e.name or "").split(".")[0] not in _LIBRARIES:
            raise
        raise ConfigError("Slack support is not installed: pip install 'gistbot[slack]' "
                          "(or unset the SLACK_* tokens)") from None
    from bot.shutdown import reply_grace

    await serve(service, SlackOptions.from_settings(settings), claims, client=client, stop=stop,
                history=history, grace=reply_grace(settings.shutdown_grace_seconds))
