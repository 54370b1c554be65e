"""The running features: each listed feature's object, built once by the application
(``bot.app``), and their hooks run in the order the features are listed.

``Features`` is what the chat service holds (``bot.conversation.hooks.FeatureSet``): it asks
``prompt_lines`` before each reply, hands each feature's commands their object (``of``), and
starts and stops the features' own work with the application.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

from bot.messages import IncomingMessage
from memory.tokens import Tokenizer

__all__ = ["RunningFeatures"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class RunningFeatures:
    """The running objects of the listed features, and their hooks."""

    def __init__(self, running: Sequence[object], tokenizer: Tokenizer) -> None:
        self.running = tuple(running)
        self.tokenizer = tokenizer

    def of(self, kind: type[T]) -> T:
        """The running feature object of type ``kind`` (``LookupError``: none runs)."""
        for obj in self.running:
            if isinstance(obj, kind):
                return obj
        raise LookupError(f"no feature {kind.__name__} runs in this service")

    async def prompt_lines(self, msg: IncomingMessage, budget: int) -> Sequence[str]:
        """Every feature's lines for the reply to ``msg``, each within what the ones before
        it left of ``budget`` tokens. A feature that fails adds nothing (the reply is worth
        more than any one feature's part of it)."""
        lines: list[str] = []
        for obj in self.running:
            hook = getattr(obj, "prompt_lines", None)
            if hook is None:
                continue
            left = budget - (self.tokenizer.count("\n".join(lines)) if lines else 0)
            try:
                lines += await hook(msg, left)
            except Exception:
                log.warning("%s added nothing to the reply to %s in %s", type(obj).__name__,
                            msg.message_id, msg.key, exc_info=True)
        return lines

    async def start(self) -> None:
        """Start the features' own work (their scheduled jobs)."""
        for obj in self.running:
            start = getattr(obj, "start", None)
            if start is not None:
                await start()

    async def close(self) -> None:
        """Stop it, in the reverse order."""
        for obj in reversed(self.running):
            close = getattr(obj, "close", None)
            if close is not None:
                await close()
