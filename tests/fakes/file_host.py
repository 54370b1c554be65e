"""A platform's file host on a fake's own HTTP server: Discord's CDN (attachment URLs) and
Slack's ``url_private`` (which wants the bot token). Mounted by ``FakeDiscord`` and
``FakeSlack`` (``files``); tests put files in with ``add`` and read ``fetched`` to see who
asked with which headers.

A file may be held back until its ``release`` event is set (a slow download), lie about its
size or type, be sent with a ``Content-Encoding`` or redirect elsewhere.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote

from aiohttp import web

__all__ = ["FileHost", "Hosted"]

_ids = itertools.count(1)


@dataclass
class Hosted:
    """One file: its bytes and how the host answers for it."""

    data: bytes
    content_type: str = "application/octet-stream"
    headers: Mapping[str, str] = field(default_factory=dict)
    status: int = 200
    release: asyncio.Event | None = None  # served only once set
    chunked: bool = False  # sent without a Content-Length, in pieces
    token: str | None = None  # wanted instead of the host's (another app's file)


class FileHost:
    """Serves ``{prefix}/{id}/{name}``; with ``token`` set, only to ``Bearer <token>``."""

    def __init__(self, prefix: str, *, token: str | None = None) -> None:
        self.prefix = prefix.rstrip("/")
        self.token = token
        self.base_url = ""  # set by the fake once it listens
        self.files: dict[str, Hosted] = {}
        self.fetched: list[tuple[str, Mapping[str, str]]] = []  # (path, request headers)

    def mount(self, app: web.Application) -> None:
        """Add the route to the fake's application."""
        app.router.add_get(self.prefix + "/{id}/{name}", self._serve)

    def add(self, name: str, data: bytes, content_type: str = "text/plain", **how: object
            ) -> str:
        """Host ``data`` as ``name``; returns its URL (see ``Hosted`` for ``how``)."""
        ident = str(next(_ids))
        self.files[ident] = Hosted(data, content_type, **how)  # type: ignore[arg-type]
        return f"{self.base_url}{self.prefix}/{ident}/{quote(name)}"

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        self.fetched.append((request.path, dict(request.headers)))
        hosted = self.files.get(request.match_info["id"])
        if hosted is None:
            return web.Response(status=404)
        wanted = hosted.token or self.token
        if wanted is not None and request.headers.get("Authorization") != f"Bearer {wanted}":
            return web.Response(status=403, text="<html>sign in</html>", content_type="text/html")
        if hosted.release is not None:
            await hosted.release.wait()
        headers = {"Content-Type": hosted.content_type, **hosted.headers}
        if not hosted.chunked:
            return web.Response(body=hosted.data, status=hosted.status, headers=headers)
        resp = web.StreamResponse(status=hosted.status, headers=headers)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for at in range(0, len(hosted.data), 65536):
            await resp.write(hosted.data[at:at + 65536])
        await resp.write_eof()
        return resp
