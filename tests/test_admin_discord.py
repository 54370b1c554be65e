"""Readiness follows the Discord gateway link: a real discord.py client against the loopback
Discord; the fake drops the socket, the client reports the disconnect, reconnects (the fake
refuses RESUME, so it identifies again) and is ready again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from bot.admin.server import AdminServer
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import make_settings, running


async def _ready(url: str) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/readyz") as r:
        return r.status, await r.json()


async def test_readyz_follows_the_gateway_link(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, client, _):
        server = AdminServer(rt, host="127.0.0.1", port=0, inspector=False, token=None)
        await server.start()
        try:
            url = f"http://127.0.0.1:{server.port}"
            events: list[str] = []
            metrics = server.metrics
            for name in ("connected", "disconnected"):
                hook = getattr(metrics, name)
                setattr(metrics, name, lambda p, _h=hook, _n=name: (events.append(_n), _h(p)))
            status, body = await _ready(url)  # attached after login: not known as connected
            assert status == 503 and not body["checks"]["discord"]["ok"]  # type: ignore[index]
            await discord_fake._sockets[0].close()  # the gateway drops the link
            await discord_fake.wait_for(lambda f: len(f.identifies) == 2 and f.connected == 1)
            for _ in range(300):  # no timing asserted: wait until READY was handled
                if "connected" in events:
                    break
                await asyncio.sleep(0.05)
            assert events[0] == "disconnected" and "connected" in events, events
            status, body = await _ready(url)
            assert status == 200, json.dumps(body)
            client.dispatch("disconnect")  # what discord.py dispatches when the link drops
            for _ in range(100):
                await asyncio.sleep(0.01)
                if events[-1] == "disconnected":
                    break
            status, _ = await _ready(url)
            assert status == 503
        finally:
            await server.stop()
