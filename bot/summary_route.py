"""How a channel's summaries are written: the channel's ``summary_model`` and ``language``,
and their tokens counted against the channel's server (``bot.quota``).

``memory.summarizer.Summarizer`` asks the router for each channel's ``SummaryRoute``; the
model it gets is the shared ``LLM`` bound to the channel (``ChannelModel``), so memory/
needs to know nothing of settings or quotas.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bot.channel_config import ChannelConfig
from bot.llm import LLM, Completion
from bot.quota import Quota
from bot.usage_tab import open_tab
from memory.completion import ChatMessage, SummaryRoute
from memory.models import ChannelKey

__all__ = ["ChannelModel", "SummaryRouter"]

log = logging.getLogger(__name__)


class ChannelModel:
    """``llm`` for one channel's summaries: its chosen model (None: the configured one) and
    every call's reported usage counted against its server."""

    def __init__(self, llm: LLM, key: ChannelKey, model: str | None, quota: Quota) -> None:
        self.llm, self.key, self.model, self.quota = llm, key, model, quota

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> Completion:
        """One summary call; its tokens go on the server's count."""
        extra = {"model": self.model} if self.model else {}
        with open_tab() as tab:  # what the provider reported (the offline model: nothing)
            try:
                return await self.llm.complete(
                    messages, max_tokens=max_tokens, purpose=purpose, **extra
                )
            finally:
                if tab.total:
                    await self.quota.charge_server(self.key, tab.total)


class SummaryRouter:
    """Callable ``memory.completion.SummaryRouter`` over the channel settings."""

    def __init__(self, llm: LLM, channels: ChannelConfig, quota: Quota) -> None:
        self.llm, self.channels, self.quota = llm, channels, quota

    async def __call__(self, key: ChannelKey) -> SummaryRoute:
        settings = await self.channels.get(key)
        model = ChannelModel(self.llm, key, settings.chosen("summary_model"), self.quota)
        return SummaryRoute(model, settings.language or None)
