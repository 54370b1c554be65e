"""Build and run the Discord client (imports discord.py: reach it through
``adapters.discord``, which says which extra to install when it is missing)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import discord

from adapters.backfill import HistoryStore
from adapters.discord.client import GistbotClient
from adapters.discord.files import file_source
from adapters.discord.options import shards, token
from bot.platform import ConfigError, Features, GistbotError, PlatformUnreachable, Settings

__all__ = ["RETRY_BASE", "RETRY_MAX", "api_host", "create_client", "serve"]

log = logging.getLogger(__name__)

RETRY_BASE = 2.0  # seconds before the first reconnect after losing Discord
RETRY_MAX = 300.0
# Failures of the network or of Discord's side: worth retrying once the bot has connected.
_NETWORK = (OSError, aiohttp.ClientError, asyncio.TimeoutError, discord.GatewayNotFound,
            discord.DiscordServerError)
# Gateway close codes that no retry fixes (the token, the shards, the intents).
_FATAL_CLOSE = {4004: "the token was rejected", 4010: "invalid shard", 4011: "sharding required",
                4012: "invalid API version", 4013: "invalid intents", 4014: "disallowed intents"}
_BAD_TOKEN = ("DISCORD_TOKEN was rejected by Discord: copy a fresh token from the Developer "
              "Portal (Bot → Reset Token)")


def create_client(features: Features, settings: Settings, *,
                  history: HistoryStore | None = None, **client_options: Any) -> GistbotClient:
    """A client for ``features`` (``client_options`` pass through to ``discord.Client``);
    with ``history`` (the store) it backfills what it missed after downtime."""
    features.attachments.register(file_source())  # its files are read (bot.attachments)
    return GistbotClient(features, settings, history=history, **client_options)


def api_host() -> str:
    """The host discord.py talks to (``discord.com``; the loopback fake in tests)."""
    url = urlsplit(discord.http.Route.BASE)
    return f"{url.hostname}:{url.port}" if url.port else str(url.hostname)


def _brief(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def serve(features: Features, settings: Settings,
                history: HistoryStore | None = None, *,
                stop: asyncio.Event | None = None, grace: float = 10.0) -> None:
    """Connect to Discord and serve until cancelled or ``stop`` is set (then replies in
    flight get ``grace`` seconds: ``GistbotClient.shutdown``); with ``history`` (the store)
    each connection backfills what was missed while down.

    At the first start, raises ``ConfigError`` for a bad token or the Message Content
    intent not enabled in the Developer Portal, and ``PlatformUnreachable`` (one sentence:
    "cannot reach discord.com …") when Discord cannot be reached. Once it has logged in,
    discord.py resumes dropped gateway connections itself; if the client still gives up on
    a network failure, a new one connects after a backoff (2 s doubling to 5 min) instead
    of the bot exiting.
    """
    waiting = stop or asyncio.Event()  # never set: run until cancelled
    loop = asyncio.get_running_loop()
    delay = RETRY_BASE
    logged_in = False
    while True:
        client = create_client(features, settings, history=history,
                               **shards(settings.discord))
        started = loop.time()
        error = await _session(client, settings, waiting, grace)
        if error is None:
            return  # stopped or closed on purpose
        # A client that logged in keeps its user; one that never did ends the start here.
        logged_in = logged_in or client.user is not None
        if not logged_in:
            raise PlatformUnreachable(
                f"cannot reach {api_host()} ({_brief(error)}): check the network, DNS, proxy "
                "or firewall, and https://discordstatus.com; once connected, gistbot "
                "reconnects by itself"
            ) from None
        if loop.time() - started > RETRY_MAX:
            delay = RETRY_BASE  # it had been up a while: a new blip starts a new backoff
        log.warning("lost the connection to Discord (%s); reconnecting in %.0fs",
                    _brief(error), delay)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(waiting.wait(), delay)  # a signal ends the wait
        if waiting.is_set():
            return
        delay = min(delay * 2, RETRY_MAX)


async def _session(client: GistbotClient, settings: Settings, stop: asyncio.Event,
                   grace: float) -> BaseException | None:
    """One client's life: None when it ended on purpose, the network failure that ended it
    otherwise. A bad token, the Message Content intent refused and a close code no
    reconnect can help raise (``ConfigError``, ``GistbotError``)."""
    try:
        async with client:
            # stopped on purpose (SIGTERM/SIGINT: replies drained) or closed on purpose
            await _run_until_stop(client, token(settings.discord), stop, grace)
        return None
    except discord.LoginFailure:
        raise ConfigError(_BAD_TOKEN) from None
    except discord.PrivilegedIntentsRequired:
        raise ConfigError("Discord refused the Message Content intent: enable it in the "
                          "Developer Portal (Bot → Privileged Gateway Intents → Message "
                          "Content Intent)") from None
    except discord.ConnectionClosed as e:
        if e.code == 4004:
            raise ConfigError(_BAD_TOKEN) from None
        if e.code in _FATAL_CLOSE:
            raise GistbotError(f"Discord closed the connection: {_FATAL_CLOSE[e.code]} "
                               f"(code {e.code})") from None
        return e
    except _NETWORK as e:
        return e


async def _run_until_stop(client: GistbotClient, token: str, stop: asyncio.Event,
                          grace: float) -> None:
    """Run ``client`` until it ends or ``stop`` is set (then replies in flight get ``grace``
    seconds)."""
    running = asyncio.create_task(client.start(token))
    stopping = asyncio.create_task(stop.wait())
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
