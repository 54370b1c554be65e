"""How a channel's summaries are written: the channel's ``summary_model`` and ``language``,
and who pays for them (``bot.channels.quota``).

``memory.summarizer.Summarizer`` asks the router for each channel's ``SummaryRoute``; the
model it gets is the shared ``LLM`` bound to the channel (``ChannelModel``), so memory/
needs to know nothing of settings or quotas.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from bot.channels.config import ChannelConfig
from bot.channels.quota import Quota
from bot.channels.usage_tab import current_payer, paying
from bot.llm.client import LLM, Completion
from memory.completion import ChatMessage, SummaryRoute
from memory.models import ChannelKey

__all__ = ["ChannelModel", "SummaryRouter"]

log = logging.getLogger(__name__)


class ChannelModel:
    """``llm`` for one channel's summaries: its chosen model (None: the configured one).

    A background summary (``summary``: compaction) is always the server's, even when the
    compaction started inside someone's reply (its task inherits the reply's payer); a
    ``digest`` (``/summary``) is whoever's command asked for it, or the server's."""

    def __init__(self, llm: LLM, key: ChannelKey, model: str | None, quota: Quota) -> None:
        self.llm, self.key, self.model, self.quota = llm, key, model, quota

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> Completion:
        """One summary call, metered on the right bill."""
        extra: dict[str, Any] = {"model": self.model} if self.model else {}
        payer = current_payer() if purpose != "summary" else None
        if payer is None:
            payer = self.quota.bill(self.key, "compaction" if purpose == "summary" else "summary")
        with paying(payer):
            return await self.llm.complete(messages, max_tokens=max_tokens, purpose=purpose,
                                           **extra)


class SummaryRouter:
    """Callable ``memory.completion.SummaryRouter`` over the channel settings."""

    def __init__(self, llm: LLM, channels: ChannelConfig, quota: Quota) -> None:
        self.llm, self.channels, self.quota = llm, channels, quota

    async def __call__(self, key: ChannelKey) -> SummaryRoute:
        settings = await self.channels.get(key)
        model = ChannelModel(self.llm, key, settings.chosen("summary_model"), self.quota)
        return SummaryRoute(model, settings.language or None)
