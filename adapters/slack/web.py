"""The bot's Slack Web API client, and the two ways to call it: ``call`` for what may fail
quietly (reads, ephemeral notices), ``write`` for what changes what people see.

The client retries reads after a connection error or a 5xx, and every call after a 429
(Slack did nothing then). It never repeats a write blind: a post Slack may have performed
before the connection failed would show twice. ``write`` raises ``OutcomeUnknown`` instead,
and the outbox looks the post up by its metadata before posting again
(``bot.conversation.lookup``).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.slack.options import bot_token
from bot.platform import OutcomeUnknown, SlackSettings

__all__ = ["UNKNOWN", "UNKNOWN_ERRORS", "WRITES", "call", "make_web_client", "respond_once",
           "webhook_client", "write"]

log = logging.getLogger(__name__)
WRITES = frozenset({"chat.postMessage", "chat.update", "chat.delete", "chat.postEphemeral"})
"""Methods that change what people see: never repeated by the client itself."""
UNKNOWN = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError)
"""Failures after which a call may or may not have taken effect (reset, timeout…)."""
UNKNOWN_ERRORS = frozenset({"fatal_error", "internal_error"})
"""Slack's errors that say part of the operation may have succeeded before it failed."""


def _method(request: HttpRequest) -> str:
    return request.url.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]


class _ReadsOnly(AsyncRetryHandler):
    """Retries what its base class retries, except a write (see ``WRITES``)."""

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None,
                               error: Exception | None = None) -> bool:
        if _method(request) in WRITES:
            return False
        return await super()._can_retry_async(state=state, request=request,
                                              response=response, error=error)


class _ConnectionRetry(_ReadsOnly, AsyncConnectionErrorRetryHandler):
    """A read after a connection error."""


class _ServerErrorRetry(_ReadsOnly, AsyncServerErrorRetryHandler):
    """A read after a 500 or 503."""


class _RateLimitRetry(AsyncRateLimitErrorRetryHandler):
    """Any call after a 429, once its ``Retry-After`` has passed (plus up to a tenth of it,
    so replicas limited together do not all come back at once)."""

    async def prepare_for_next_attempt_async(self, *, state: RetryState, request: HttpRequest,
                                             response: HttpResponse | None = None,
                                             error: Exception | None = None) -> None:
        if response is None:
            raise error or RuntimeError("rate limit retry without a response")
        values = {k.lower(): v for k, v in response.headers.items()}.get("retry-after")
        try:
            wait = float(values[0]) if values else 1.0
        except ValueError:
            wait = 1.0
        state.next_attempt_requested = True
        await asyncio.sleep(wait * (1 + random.random() / 10))
        state.increment_current_attempt()


def make_web_client(section: SlackSettings, *, base_url: str | None = None,
                    timeout: float = 30.0) -> AsyncWebClient:
    """The bot's Web API client: ``timeout`` seconds per call; reads retried after a
    connection error (twice) or a 5xx (once), every call after ``Retry-After`` (up to three
    times); writes never repeated blind (see the module docstring)."""
    return AsyncWebClient(
        token=bot_token(section),
        base_url=base_url or AsyncWebClient.BASE_URL,
        timeout=timeout,  # type: ignore[arg-type]  # aiohttp's ClientTimeout takes a float
        retry_handlers=[
            _ConnectionRetry(max_retry_count=2),
            _ServerErrorRetry(max_retry_count=1),
            _RateLimitRetry(max_retry_count=3),
        ],
    )


def webhook_client(url: str, *, timeout: float = 30.0) -> AsyncWebhookClient:
    """A client for a command's ``response_url``: a post is repeated only after a 429, never
    blind after a connection error (bolt's own ``respond`` would repeat it)."""
    return AsyncWebhookClient(url=url, timeout=timeout,  # type: ignore[arg-type]
                              retry_handlers=[_RateLimitRetry(max_retry_count=3)])


async def respond_once(what: str, request: Awaitable[Any]) -> bool:
    """Send a ``response_url`` post; whether Slack took it. Raises ``OutcomeUnknown`` when
    it may or may not have (5xx, reset, timeout)."""
    try:
        r = await request
    except UNKNOWN as e:
        raise OutcomeUnknown(f"Slack {what}: {type(e).__name__}") from e
    if r.status_code >= 500:
        raise OutcomeUnknown(f"Slack {what}: HTTP {r.status_code}")
    if r.status_code >= 400:
        log.error("Slack %s refused: HTTP %s %r", what, r.status_code, r.body)
        return False
    return True


async def call(what: str, request: Awaitable[Any]) -> Any | None:
    """The answer to ``request``, or None (logged with the stack) when it failed."""
    try:
        return await request
    except Exception:
        log.exception("Slack %s failed", what)
        return None


async def write(what: str, request: Awaitable[Any], *, gone: str = "") -> Any | None:
    """The answer to a write: None when Slack refused it (logged; with ``gone``, an error
    that means "done already", e.g. ``message_not_found`` for a delete, answers ``{}``).
    Raises ``OutcomeUnknown`` when it may or may not have taken effect (5xx, reset,
    timeout)."""
    try:
        return await request
    except SlackApiError as e:
        status, error = e.response.status_code, e.response.get("error")
        if status >= 500 or error in UNKNOWN_ERRORS:
            raise OutcomeUnknown(f"Slack {what}: HTTP {status} {error}") from e
        if gone and error == gone:
            return {}
        log.error("Slack %s refused: %s (HTTP %s)", what, error, status)
        return None
    except UNKNOWN as e:
        raise OutcomeUnknown(f"Slack {what}: {type(e).__name__}") from e
    except Exception:
        log.exception("Slack %s failed", what)
        return None
