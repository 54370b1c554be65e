"""The one thing ``memory/`` needs from a language model: complete a chat, return text.

``bot.llm.client.OpenAILLM`` and ``bot.llm.offline.OfflineLLM`` satisfy this structurally;
``memory/`` never imports ``bot/``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol, TypedDict, runtime_checkable

from memory.models import ChannelKey

__all__ = [
    "PREEMPTIBLE",
    "ChatMessage",
    "CompletionLike",
    "SummaryModel",
    "SummaryRoute",
    "SummaryRouter",
]

PREEMPTIBLE: ContextVar[bool] = ContextVar("summary_preemptible", default=True)
"""Whether a summary call made in this context may give its endpoint slot to a reply.
Compaction clears it for a channel whose summary was already preempted (aging), so the
next attempt queues with the replies and runs to the end; a model gate reads it."""


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


@dataclass(frozen=True, slots=True)
class SummaryRoute:
    """How one channel's summaries are written: by which model (the application may wrap
    it, e.g. to use the channel's model and count its tokens) and in which language (None:
    the conversation's own)."""

    model: SummaryModel
    language: str | None = None


SummaryRouter = Callable[[ChannelKey], Awaitable[SummaryRoute]]
"""Given a channel, its ``SummaryRoute`` (``Summarizer(router=...)``)."""
