"""The process ``test_discord_backfill.py`` kills: ``gistbot run``'s Discord path
(``run_discord`` with the store for backfill) against the loopback Discord.

Usage: ``python -m tests.discord_child DB_PATH API_BASE GATEWAY_URL``

It prints ``A <message id>`` (flushed) after the service handled each message, so the
parent knows at least one was stored before it kills the process mid-burst;
``GISTBOT_TEST_KILL_AT`` makes it kill itself at an exact point instead
(``tests.harness.kill_points``).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import discord
import yarl

from adapters.discord import run_discord
from bot.app import Runtime
from bot.messages import IncomingMessage
from bot.settings import load_settings
from tests.harness.kill_points import arm


async def main(db: str, api_base: str, gateway: str) -> None:
    discord.http.Route.BASE = api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)
    # A killed process's claim on a mention runs out in 2 s (bot.missed.owed; the default is 30).
    settings = load_settings({"DISCORD_TOKEN": "fake-discord-token", "LLM_PROVIDER": "offline",
                              "DATABASE_URL": f"sqlite:///{db}", "REPLY_CLAIM_SECONDS": "2"},
                             env_file=None)
    async with Runtime.open(settings) as rt:
        arm(rt.storage)  # GISTBOT_TEST_KILL_AT: die at an exact point (tests only)
        handle = rt.service.receive

        async def receive(msg: IncomingMessage, **kw: Any) -> Any:
            try:
                return await handle(msg, **kw)
            finally:
                sys.stdout.write(f"A {msg.message_id}\n")
                sys.stdout.flush()

        rt.service.receive = receive  # type: ignore[method-assign]
        await run_discord(rt.features, settings, rt.storage.history())


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
