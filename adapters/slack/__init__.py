"""The Slack adapter (slack-bolt), as a package whose files name its parts.

- ``text``: Slack events in (``to_incoming``), mrkdwn out (pure).
- ``options``: the checks of ``Settings.slack``.
- ``users``: the bot's identity and the cached user directory.
- ``events``: messages, mentions, edits and deletions; placeholders and replies.
- ``commands``: the slash commands of the registry (``bot.commands``), through one
  handler; ``manifest``: their entries in ``slack_manifest.yaml``.
- ``app``: ``SlackAdapter`` (acknowledge after commit, reply after) and ``build_app``.
- ``web`` and ``transport``: the Web API client; HTTP mode (checked in front of bolt:
  size, signature, form) and Socket Mode.
- ``backfill``: reading back what was missed while the bot was away.
- ``launch``: ``serve``.

``PLATFORM`` is the ``slack`` entry point the command line starts it from; it also
answers whether the settings start Slack and which keys are direct messages.

Importing this package does not import slack-bolt; ``run_slack`` does, after
``bot.extras.require(EXTRA)``: a missing library is one line naming the extra
(``gistbot[slack]``, part of the default install).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from bot.platform import ChannelKey, Extra, Features, Launch, Platform, Settings, require

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

    from adapters.backfill import HistoryStore

__all__ = ["EXTRA", "PLATFORM", "configured", "is_direct", "run_slack"]

EXTRA = Extra("slack", "Slack support", "adapters.slack.launch", "SLACK_BOT_TOKEN")


async def run_slack(
    features: Features,
    settings: Settings,
    *,
    client: AsyncWebClient | None = None,
    stop: asyncio.Event | None = None,
    history: HistoryStore | None = None,
) -> None:
    """Serve Slack for ``features`` with the ``SLACK_*`` settings until cancelled (or ``stop``);
    with ``history`` (the store) missed messages are backfilled after downtime."""
    require(EXTRA, configured=True)
    from adapters.slack.launch import serve
    from adapters.slack.options import checked
    from bot.platform import reply_grace

    await serve(features, checked(settings), client=client, stop=stop, history=history,
                grace=reply_grace(settings.restarts.shutdown_grace_seconds))


async def _serve(launch: Launch) -> int:
    history = cast("HistoryStore", launch.history)  # backfill after downtime reads the cursor
    await run_slack(launch.features, launch.settings, history=history, stop=launch.stop)
    return 0


def configured(settings: Settings) -> bool:
    """Whether the settings start Slack: a bot token with an app token or a signing secret."""
    return settings.slack.configured


def is_direct(key: ChannelKey) -> bool:
    """Whether ``key`` is a direct message: Slack's DM channel ids start with ``D``."""
    return key.channel.startswith("D")


PLATFORM = Platform("slack", _serve, EXTRA, configured=configured, is_direct=is_direct)
