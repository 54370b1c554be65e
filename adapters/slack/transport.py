"""How Slack reaches the app: HTTP mode (an aiohttp server; bolt checks every request's
signature) or Socket Mode (an outbound websocket; no public URL)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

__all__ = ["EVENTS_PATH", "connect_socket_mode", "http_app", "serve_http"]

EVENTS_PATH = "/slack/events"


def http_app(app: AsyncApp, path: str = EVENTS_PATH) -> web.Application:
    """An aiohttp application that hands ``POST path`` to bolt (which verifies signatures)."""

    async def handle(request: web.Request) -> web.Response:
        response: web.Response = await to_aiohttp_response(
            await app.async_dispatch(await to_bolt_request(request))
        )
        return response

    web_app = web.Application()
    web_app.router.add_post(path, handle)
    return web_app


@contextlib.asynccontextmanager
async def serve_http(app: AsyncApp, host: str, port: int) -> AsyncIterator[str]:
    """Serve ``app`` in HTTP mode; yields the events URL (port 0 picks a free port)."""
    runner = web.AppRunner(http_app(app))
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound_host, bound_port = runner.addresses[0][:2]
        yield f"http://{bound_host}:{bound_port}{EVENTS_PATH}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def connect_socket_mode(
    app: AsyncApp, app_token: str, client: AsyncWebClient
) -> AsyncIterator[AsyncSocketModeHandler]:
    """Connect ``app`` over Socket Mode (``apps.connections.open`` with the app token)."""
    handler = AsyncSocketModeHandler(app, app_token, web_client=client)
    try:
        await handler.connect_async()  # type: ignore[no-untyped-call]  # bolt leaves it bare
        yield handler
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]
