"""Point the platform libraries at the loopback fakes, from the environment: the one thing a
test changes in a real ``gistbot`` process (``tests/bot_child.py``; any command, through
``tests/fakes/site/sitecustomize.py``).

``GISTBOT_TEST_SLACK_API``: the fake Slack's Web API URL (``AsyncWebClient.BASE_URL``;
Socket Mode follows the URL ``apps.connections.open`` answers). ``GISTBOT_TEST_DISCORD_API``
and ``GISTBOT_TEST_DISCORD_GATEWAY``: the fake Discord's REST base and gateway URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["redirect_platforms"]


def redirect_platforms(env: Mapping[str, str] = os.environ) -> None:
    """Redirect slack-sdk and discord.py as ``env`` says (nothing when it says nothing)."""
    if api := env.get("GISTBOT_TEST_SLACK_API"):
        from slack_sdk.web.async_client import AsyncWebClient

        AsyncWebClient.BASE_URL = api
    if api := env.get("GISTBOT_TEST_DISCORD_API"):
        import discord
        import yarl

        discord.http.Route.BASE = api
        gateway = env["GISTBOT_TEST_DISCORD_GATEWAY"]
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)
