"""Build and run the Discord client (imports discord.py: reach it through
``adapters.discord``, which says which extra to install when it is missing)."""

from __future__ import annotations

from typing import Any

import discord

from adapters.backfill import HistoryStore
from adapters.discord.client import GistbotClient
from adapters.discord.options import DiscordOptions
from bot.errors import ConfigError
from bot.service import ChatService

__all__ = ["create_client", "serve"]


def create_client(service: ChatService, options: DiscordOptions, *,
                  history: HistoryStore | None = None, **client_options: Any) -> GistbotClient:
    """A client for ``service`` (``client_options`` pass through to ``discord.Client``);
    with ``history`` (the store) it backfills what it missed after downtime."""
    return GistbotClient(service, options, history=history, **client_options)


async def serve(service: ChatService, options: DiscordOptions,
                history: HistoryStore | None = None) -> None:
    """Connect to Discord and serve until cancelled or the connection ends for good.

    Raises ``ConfigError`` for a bad token or the Message Content intent not enabled in
    the Developer Portal.
    """
    client = create_client(service, options, history=history, **options.shards())
    try:
        async with client:
            await client.start(options.token)
    except discord.LoginFailure:
        raise ConfigError("DISCORD_TOKEN was rejected by Discord: copy a fresh token from the "
                          "Developer Portal (Bot → Reset Token)") from None
    except discord.PrivilegedIntentsRequired:
        raise ConfigError("Discord refused the Message Content intent: enable it in the "
                          "Developer Portal (Bot → Privileged Gateway Intents → Message "
                          "Content Intent)") from None
