"""How Slack reaches the app: HTTP mode (an aiohttp server) or Socket Mode (an outbound
websocket; no public URL).

HTTP mode is bolt's own aiohttp server (``AsyncSlackAppServer``: its route,
``to_bolt_request``, ``async_dispatch``) with one gate in front, an aiohttp middleware that
checks every request in this order, so that nobody without the signing secret can make the
bot parse, log or store anything:

1. a body over ``MAX_BODY_BYTES`` is refused with 413 before it is read (Content-Length) or
   as soon as reading passes the limit (chunked);
2. the Slack signature (v0 HMAC of timestamp and body, timestamp within five minutes) is
   verified before any parsing: 401 otherwise, logged without the body, at most once a
   minute at INFO (each one at DEBUG);
3. a body that is not a JSON object (events) or a form (commands) is 400, not a 500
   with a traceback;
4. only then bolt dispatches it. bolt's own signature check is off (``build_app``): it
   runs as a middleware after bolt has parsed the body into its request, so it cannot be
   the first; the gate's check is the only one. bolt's log lines that carry a request
   body are kept at DEBUG (``quiet_bolt_logs``), and every line it logs has its control
   characters escaped, so a body cannot forge a log line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from urllib.parse import parse_qsl

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_server import AsyncSlackAppServer
from slack_bolt.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

__all__ = [
    "EVENTS_PATH",
    "MAX_BODY_BYTES",
    "connect_socket_mode",
    "escape",
    "gate",
    "http_app",
    "quiet_bolt_logs",
    "serve_http",
]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
MAX_BODY_BYTES = 1 << 20
"""Slack's event and command payloads are a few KB (a 40,000-character message with its
blocks stays far below); anything over 1 MiB is refused unread."""
_REPORT_EVERY = 60.0


def escape(text: object, limit: int = 300) -> str:
    """``text`` safe for one log line: control characters (newlines included) escaped, cut
    to ``limit`` characters. Use it for anything a Slack user or sender wrote."""
    out = str(text).encode("unicode_escape").decode("ascii", "replace")
    return out if len(out) <= limit else f"{out[:limit]}…"


class _BodyFilter(logging.Filter):
    """On bolt's loggers: a record that carries a request body is dropped unless its
    logger is at DEBUG; every record's text is escaped to one line."""

    _BODY_MARKERS = ("request body", "Request body", "Unhandled request", "({'", '{"')

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.levelno > logging.DEBUG and any(m in text for m in self._BODY_MARKERS):
            if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
                return False
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.msg, record.args = escape(text, 2000), None
        return True


def quiet_bolt_logs(*loggers: logging.Logger) -> None:
    """Install the body filter on ``loggers`` (bolt's app logger and slack_bolt's own)."""
    for logger in (*loggers, logging.getLogger("slack_bolt"), logging.getLogger("slack_sdk")):
        if not any(isinstance(f, _BodyFilter) for f in logger.filters):
            logger.addFilter(_BodyFilter())


class _Rejections:
    """Counts refused requests; one INFO line a minute per reason, each at DEBUG."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def refuse(self, status: int, reason: str, request: web.Request) -> web.Response:
        peer = escape(request.remote or "?", 60)
        log.debug("refused a Slack request from %s: %s (%d)", peer, reason, status)
        now = time.monotonic()
        self._count[reason] = self._count.get(reason, 0) + 1
        if now - self._last.get(reason, -_REPORT_EVERY) >= _REPORT_EVERY:
            self._last[reason] = now
            log.info("refused %d Slack request(s) in the last minute: %s (last from %s)",
                     self._count.pop(reason), reason, peer)
        return web.Response(status=status, text=reason)


async def _read_limited(request: web.Request, limit: int) -> bytes | None:
    """The body, or None when it is over ``limit`` bytes: refused on its Content-Length
    unread, or (chunked) as soon as reading passes aiohttp's ``client_max_size`` (1 MiB in
    bolt's application) or, after reading, ``limit``."""
    if request.content_length is not None and request.content_length > limit:
        return None
    try:
        body = await request.read()  # kept by aiohttp: bolt's request.text() reads it again
    except web.HTTPRequestEntityTooLarge:
        return None
    return body if len(body) <= limit else None


def _signed(
    verifier: SignatureVerifier, body: bytes, timestamp: str | None, signature: str | None
) -> bool:
    """Slack's v0 signature over the raw body; a malformed timestamp is simply unsigned."""
    try:
        return verifier.is_valid(body, timestamp, signature)
    except ValueError:  # int(timestamp) of something that is not a number
        return False


def _well_formed(body: bytes, content_type: str) -> bool:
    """A JSON object (events, interactivity as JSON) or a form (commands); nothing else."""
    try:
        text = body.decode("utf-8")
        if content_type == "application/x-www-form-urlencoded":
            pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text))
            payload = dict(pairs).get("payload")
            return payload is None or isinstance(json.loads(payload), dict)
        return isinstance(json.loads(text), dict)
    except (UnicodeDecodeError, ValueError):
        return False


def gate(signing_secret: str, *, max_body: int = MAX_BODY_BYTES) -> Middleware:
    """The aiohttp middleware that checks a request (size, signature, form) before bolt's
    handler sees it; see the module docstring."""
    verifier = SignatureVerifier(signing_secret)
    rejections = _Rejections()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        body = await _read_limited(request, max_body)
        if body is None:
            return rejections.refuse(413, f"body over {max_body} bytes", request)
        timestamp = request.headers.get("X-Slack-Request-Timestamp")
        signature = request.headers.get("X-Slack-Signature")
        if not signing_secret or not _signed(verifier, body, timestamp, signature):
            return rejections.refuse(401, "invalid or missing Slack signature", request)
        if not _well_formed(body, request.content_type):
            return rejections.refuse(400, "malformed body", request)
        return await handler(request)

    return check


def http_app(
    app: AsyncApp,
    signing_secret: str,
    path: str = EVENTS_PATH,
    *,
    max_body: int = MAX_BODY_BYTES,
) -> web.Application:
    """bolt's aiohttp application for ``POST path`` (a new one each time: ``AsyncApp.web_app``
    keeps one per app), with the gate in front."""
    web_app = AsyncSlackAppServer(port=0, path=path, app=app).web_app
    web_app.middlewares.append(gate(signing_secret, max_body=max_body))
    return web_app


@contextlib.asynccontextmanager
async def serve_http(
    app: AsyncApp, host: str, port: int, signing_secret: str | None = None
) -> AsyncIterator[str]:
    """Serve ``app`` in HTTP mode; yields the events URL (port 0 picks a free port).

    ``signing_secret`` defaults to the one ``app`` was built with (``build_app``)."""
    if signing_secret is None:
        signing_secret = str(getattr(app, "_signing_secret", "") or "")
    runner = web.AppRunner(http_app(app, signing_secret))
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
