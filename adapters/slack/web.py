"""The bot's Slack Web API client, and one way to call it that never raises."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.options import bot_token
from bot.settings.sections import SlackSettings

__all__ = ["call", "make_web_client"]

log = logging.getLogger(__name__)


def make_web_client(section: SlackSettings, *,
                    base_url: str | None = None) -> AsyncWebClient:
    """The bot's Web API client: retries connection errors, 5xx once, and 429 after
    ``Retry-After`` (up to three times)."""
    return AsyncWebClient(
        token=bot_token(section),
        base_url=base_url or AsyncWebClient.BASE_URL,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncServerErrorRetryHandler(max_retry_count=1),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ],
    )


async def call(what: str, request: Awaitable[Any]) -> Any | None:
    """The answer to ``request``, or None (logged with the stack) when it failed."""
    try:
        return await request
    except Exception:
        log.exception("Slack %s failed", what)
        return None
