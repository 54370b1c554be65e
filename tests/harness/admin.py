"""A real ``Runtime`` with its admin server on an ephemeral loopback port, an HTTP client
that keeps cookies, and helpers to fill a channel (what the inspector tests share)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bot.admin.server import AdminServer, admin_server
from bot.app import Runtime
from bot.messages import IncomingMessage
from bot.settings import load_settings
from memory.models import ChannelKey
from tests.harness.chat import ask

__all__ = ["TOKEN", "Admin", "admin", "csrf_of", "fill", "ref"]

TOKEN = "test-admin-token-0123456789"


@dataclass
class Admin:
    """The runtime, its admin server and a cookie-keeping client on it."""

    rt: Runtime
    server: AdminServer
    http: aiohttp.ClientSession

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.server.port}"

    async def login(self, token: str = TOKEN) -> aiohttp.ClientResponse:
        """POST the login form (redirects are not followed)."""
        return await self.http.post(f"{self.url}/inspector/login", data={"token": token},
                                    allow_redirects=False)

    async def page(self, key: ChannelKey, **query: str) -> str:
        """The channel page's HTML (asserting 200)."""
        async with self.http.get(f"{self.url}/inspector/channel",
                                 params={"c": ref(key), **query}) as r:
            assert r.status == 200, await r.text()
            return await r.text()


def ref(key: ChannelKey) -> str:
    """The inspector's ``c`` parameter for ``key``."""
    return f"{key.platform}:{key.workspace}:{key.channel}"


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


@contextlib.asynccontextmanager
async def admin(tmp_path: Path, **env: str) -> AsyncIterator[Admin]:
    """A runtime on ``tmp_path``/a.db (offline model unless ``env`` names one) with the
    admin server on port 0 and the inspector on."""
    settings = load_settings({
        "DATABASE_URL": f"sqlite:///{tmp_path}/a.db", "ADMIN_PORT": "0",
        "ADMIN_INSPECTOR": "true", "ADMIN_TOKEN": TOKEN, "MAX_HISTORY_MESSAGES": "8",
        "KEEP_RECENT_MESSAGES": "4", **env})
    async with Runtime.open(settings) as rt, admin_server(rt) as server:
        assert server is not None
        jar = aiohttp.CookieJar(unsafe=True)  # cookies for a bare IP address
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            yield Admin(rt, server, http)


async def fill(rt: Runtime, key: ChannelKey, n: int, *, start: int = 0, mention_every: int = 0,
               text: str = "message {i} about the Q3 launch") -> None:
    """Send ``n`` messages to the service (every ``mention_every``-th addressed to the bot)."""
    for i in range(start, start + n):
        addressed = bool(mention_every) and i % mention_every == mention_every - 1
        await ask(rt, IncomingMessage(
            key, f"m{i}", f"u{i % 3}", f"User{i % 3}", text.format(i=i), time.time(),
            mentions_bot=addressed))
