"""What the features (``bot.features``) add to a reply: the one hook point where a reply's
prompt is built.

``ReplyHooks.prompt_lines(msg, budget)`` answers the lines the features put into the memory
block of the reply to ``msg`` (the personal notes of its author), within ``budget`` tokens;
the service counts them in the prompt's budget. ``FeatureSet.of`` hands a feature's
running object to its commands. ``NO_HOOKS`` adds nothing and runs no feature (a service
built without features: tests, benchmarks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from bot.messages import IncomingMessage

__all__ = ["NO_HOOKS", "FeatureSet", "ReplyHooks"]

T = TypeVar("T")


class ReplyHooks(Protocol):
    """The features' part in a reply (``bot.features.runtime.RunningFeatures`` is one)."""

    async def prompt_lines(self, msg: IncomingMessage, budget: int) -> Sequence[str]:
        """Lines for the memory block of the reply to ``msg``, at most ``budget`` tokens."""
        ...


class FeatureSet(ReplyHooks, Protocol):
    """The running features: their hooks, and each one's object for its commands."""

    def of(self, kind: type[T]) -> T:
        """The running feature object of type ``kind`` (``LookupError``: none runs)."""
        ...


class _NoHooks:
    async def prompt_lines(self, msg: IncomingMessage, budget: int) -> Sequence[str]:
        return ()

    def of(self, kind: type[T]) -> T:
        raise LookupError(f"no feature {kind.__name__} runs in this service")


NO_HOOKS: FeatureSet = _NoHooks()
