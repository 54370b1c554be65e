"""The one thing ``memory/`` needs from a language model: complete a chat, return text.

``bot.llm.OpenAILLM`` and ``bot.llm.OfflineLLM`` satisfy this structurally; ``memory/``
never imports ``bot/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypedDict, runtime_checkable

__all__ = ["ChatMessage", "CompletionLike", "SummaryModel"]


class ChatMessage(TypedDict):
    """One OpenAI-style chat message."""

    role: str
    content: str


class CompletionLike(Protocol):
    """Anything with the completed text."""

    @property
    def text(self) -> str: ...


@runtime_checkable
class SummaryModel(Protocol):
    """A model that can write summaries. ``purpose`` is ``"summary"`` for compaction and
    ``"digest"`` for ``/summary``; implementations may route it to a cheaper model."""

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> CompletionLike: ...
