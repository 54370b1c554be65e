"""The Discord adapter (discord.py), as a package whose files name its parts.

- ``text``: a Discord message in (``to_incoming``), sized messages out (pure).
- ``options``: the checks of ``Settings.discord``, the invite URL.
- ``client``: ``GistbotClient``: messages, edits, deletions, sending, permissions.
- ``commands``: the application commands, generated from the registry (``bot.commands``);
  ``context``: Discord's permissions behind gistbot's.
- ``backfill``: reading back what was missed while the bot was away.
- ``launch``: ``create_client`` and ``serve``.

``PLATFORM`` is the ``discord`` entry point the command line starts it from; it also
answers whether the settings start Discord and which keys are direct messages.

Importing this package does not import discord.py; ``run_discord`` and ``invite_url``
do, after ``bot.extras.require(EXTRA)``: a missing library is one line naming the extra
(``gistbot[discord]``, part of the default install).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from bot.platform import ChannelKey, Extra, Features, Launch, Platform, Settings, require

if TYPE_CHECKING:
    from adapters.backfill import HistoryStore

__all__ = ["EXTRA", "PLATFORM", "configured", "invite_url", "is_direct", "run_discord"]

EXTRA = Extra("discord", "Discord support", "adapters.discord.launch", "DISCORD_TOKEN")


async def run_discord(features: Features, settings: Settings,
                      history: HistoryStore | None = None,
                      stop: asyncio.Event | None = None) -> None:
    """Serve Discord for ``service`` with the ``DISCORD_*`` settings until cancelled or
    ``stop`` (then replies in flight get their share of ``SHUTDOWN_GRACE_SECONDS``); with
    ``history`` (the store) missed messages are backfilled after downtime."""
    require(EXTRA, configured=True)
    from adapters.discord.launch import serve
    from adapters.discord.options import checked
    from bot.platform import reply_grace

    await serve(features, checked(settings), history, stop=stop,
                grace=reply_grace(settings.restarts.shutdown_grace_seconds))


def invite_url(application_id: int | str) -> str:
    """The OAuth2 URL that adds the bot to a server (see ``options.invite_url``)."""
    require(EXTRA)
    from adapters.discord.options import invite_url as url

    return url(application_id)


async def _serve(launch: Launch) -> int:
    history = cast("HistoryStore", launch.history)  # backfill after downtime reads the cursor
    await run_discord(launch.features, launch.settings, history, launch.stop)
    return 0


def configured(settings: Settings) -> bool:
    """Whether the settings start Discord: ``DISCORD_TOKEN`` is set."""
    return bool(settings.discord.discord_token)


def is_direct(key: ChannelKey) -> bool:
    """Whether ``key`` is a direct message: Discord's DMs are keyed under workspace ``dm``."""
    return key.workspace == "dm"


PLATFORM = Platform("discord", _serve, EXTRA, invite_url, configured=configured,
                    is_direct=is_direct)
