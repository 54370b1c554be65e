"""Fault points for the crash children: the process SIGKILLs itself at an exact moment,
so a test hits a narrow window (after a post, before its record) deterministically
instead of by timing luck. Product code has no hooks; the child wraps its own store
(and Slack client) with :func:`arm`.

``GISTBOT_TEST_KILL_AT`` names the points, comma-separated; the first one reached kills:

- a store method name (``outbox_posted``, ``settle_owed``, ``finish_digest_slot``…): killed
  as it is called, before it writes. Names the store lacks are ignored, so one setting
  covers a store with the outbox and one without it.
- ``placeholder``: killed once the "thinking…" placeholder is shown and remembered on its
  debt (``owed_placeholder`` returned), or, for a store without that, once Slack accepted
  the placeholder.
- ``placeholder_posted``: killed once Slack accepted the placeholder, before it could be
  remembered anywhere.
- ``intent_recorded``: killed once an outbox intent was written (a reply's first, written
  while the model answers), before anything is posted under it.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["ENV", "arm"]

ENV = "GISTBOT_TEST_KILL_AT"
PLACEHOLDER = "_thinking…_"


def die() -> None:
    """SIGKILL this process: nothing after this line runs, as in a real crash."""
    os.kill(os.getpid(), signal.SIGKILL)


def _before(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        die()
        return await fn(*args, **kwargs)

    return wrapper


def _after_placeholder_remembered(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = await fn(*args, **kwargs)
        if args and args[-1]:  # a placeholder id, not the "none any more" of an apology
            die()
        return result

    return wrapper


def _after_placeholder_posted(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = await fn(*args, **kwargs)
        if kwargs.get("text") == PLACEHOLDER:
            die()
        return result

    return wrapper


def _after(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = await fn(*args, **kwargs)
        die()
        return result

    return wrapper


def arm(store: Any, slack_client: Any = None, environ: dict[str, str] | None = None) -> None:
    """Wrap ``store`` (a memory store, or a ``bot.stores.Storage``: each of its role
    objects) and ``slack_client`` for the points named in ``GISTBOT_TEST_KILL_AT``."""
    env = os.environ if environ is None else environ
    roles = ("memory", "settings", "usage", "digests", "owed", "outbox", "backfill")
    parts = [getattr(store, r) for r in roles] if hasattr(store, "memory") else [store]

    def holder(name: str) -> Any:
        return next((part for part in parts if hasattr(part, name)), None)

    for point in filter(None, (p.strip() for p in env.get(ENV, "").split(","))):
        if point == "placeholder_posted" and slack_client is not None:
            slack_client.chat_postMessage = _after_placeholder_posted(
                slack_client.chat_postMessage)
        elif point == "placeholder":
            if (ledger := holder("owed_placeholder")) is not None:
                ledger.owed_placeholder = _after_placeholder_remembered(ledger.owed_placeholder)
            elif slack_client is not None:
                slack_client.chat_postMessage = _after_placeholder_posted(
                    slack_client.chat_postMessage)
        elif point == "intent_recorded":
            if (outbox := holder("outbox_intent")) is not None:
                outbox.outbox_intent = _after(outbox.outbox_intent)
        elif (part := holder(point)) is not None:
            setattr(part, point, _before(getattr(part, point)))
