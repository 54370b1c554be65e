"""Build and run the Discord client (imports discord.py: reach it through
``adapters.discord``, which says which extra to install when it is missing)."""

from __future__ import annotations

import asyncio
from typing import Any

import discord

from adapters.discord.client import GistbotClient
from adapters.discord.options import DiscordOptions
from bot.errors import ConfigError
from bot.service import ChatService

__all__ = ["create_client", "serve"]


def create_client(service: ChatService, options: DiscordOptions,
                  **client_options: Any) -> GistbotClient:
    """A client for ``service`` (``client_options`` pass through to ``discord.Client``)."""
    return GistbotClient(service, options, **client_options)


async def serve(service: ChatService, options: DiscordOptions, *,
                stop: asyncio.Event | None = None, grace: float = 10.0) -> None:
    """Connect to Discord and serve until cancelled, ``stop`` is set (then replies in flight
    get ``grace`` seconds: ``GistbotClient.shutdown``) or the connection ends for good.

    Raises ``ConfigError`` for a bad token or the Message Content intent not enabled in
    the Developer Portal.
    """
    client = create_client(service, options, **options.shards())
    try:
        async with client:
            running = asyncio.create_task(client.start(options.token))
            stopping = asyncio.create_task((stop or asyncio.Event()).wait())
            try:
                await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not running.done():
                    await client.shutdown(grace)
                await running
            finally:
                stopping.cancel()
                if not running.done():
                    running.cancel()
                    await asyncio.gather(running, return_exceptions=True)
    except discord.LoginFailure:
        raise ConfigError("DISCORD_TOKEN was rejected by Discord: copy a fresh token from the "
                          "Developer Portal (Bot → Reset Token)") from None
    except discord.PrivilegedIntentsRequired:
        raise ConfigError("Discord refused the Message Content intent: enable it in the "
                          "Developer Portal (Bot → Privileged Gateway Intents → Message "
                          "Content Intent)") from None
