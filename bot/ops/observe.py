"""What the chat service tells an observer (the admin server's metrics), and the log context.

``ChatService`` calls these small hooks at the points an operator wants counted, through
the ``Observers`` it is built with (none until the admin server adds its metrics), so the
service never depends on a metrics library.
``log_context`` carries the channel key and a request id (the triggering message's id) of
the message being handled, for ``LOG_FORMAT=json`` (``bot.ops.json_logs``).
"""

from __future__ import annotations

import contextvars
from typing import Protocol

from memory.models import ChannelKey

__all__ = ["NullObserver", "Observers", "ServiceObserver", "bind_request", "log_context"]

log_context: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "gistbot_log_context", default=None
)


def bind_request(key: ChannelKey, request_id: str) -> None:
    """Name the channel and request the current task is handling (for JSON log lines).

    Each adapter event runs in its own task, so the value does not leak into another.
    """
    log_context.set((f"{key.platform}:{key.workspace}:{key.channel}", request_id))


class ServiceObserver(Protocol):
    """Hooks the service calls; implementations must be cheap and never raise."""

    def recorded(self, key: ChannelKey, role: str) -> None:
        """A new turn was stored."""

    def replied(self, key: ChannelKey, seconds: float, prompt_tokens: int, seq: int,
                failed: bool) -> None:
        """A reply was produced (or failed) ``seconds`` after the message was stored;
        ``prompt_tokens`` is what memory put in the prompt, for the message at ``seq``."""

    def recalled(self, key: ChannelKey, seconds: float) -> None:
        """Building the reply's memory view (recall included) took ``seconds``."""

    def store_error(self, kind: str) -> None:
        """A store operation failed with an error of class ``kind``."""

    def connected(self, platform: str) -> None:
        """The platform's adapter logged in, or its link came back."""

    def disconnected(self, platform: str) -> None:
        """The platform's link dropped (the adapter reconnects by itself)."""


class NullObserver:
    """Observes nothing (tests, the console, the CLI tools)."""

    def recorded(self, key: ChannelKey, role: str) -> None:
        """Nothing."""

    def replied(self, key: ChannelKey, seconds: float, prompt_tokens: int, seq: int,
                failed: bool) -> None:
        """Nothing."""

    def recalled(self, key: ChannelKey, seconds: float) -> None:
        """Nothing."""

    def store_error(self, kind: str) -> None:
        """Nothing."""

    def connected(self, platform: str) -> None:
        """Nothing."""

    def disconnected(self, platform: str) -> None:
        """Nothing."""


class Observers:
    """Every observer added (the admin server's metrics, a benchmark's), told in turn;
    the runtime builds one and hands it to the service and the adapters."""

    def __init__(self) -> None:
        self.observers: list[ServiceObserver] = []

    def add(self, observer: ServiceObserver) -> None:
        """Tell ``observer`` from now on."""
        self.observers.append(observer)

    def recorded(self, key: ChannelKey, role: str) -> None:
        for o in self.observers:
            o.recorded(key, role)

    def replied(self, key: ChannelKey, seconds: float, prompt_tokens: int, seq: int,
                failed: bool) -> None:
        for o in self.observers:
            o.replied(key, seconds, prompt_tokens, seq, failed)

    def recalled(self, key: ChannelKey, seconds: float) -> None:
        for o in self.observers:
            o.recalled(key, seconds)

    def store_error(self, kind: str) -> None:
        for o in self.observers:
            o.store_error(kind)

    def connected(self, platform: str) -> None:
        for o in self.observers:
            o.connected(platform)

    def disconnected(self, platform: str) -> None:
        for o in self.observers:
            o.disconnected(platform)
