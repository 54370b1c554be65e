"""Building ``/catchup`` and the digest scheduler from ``Settings`` (``bot.app`` calls it),
so ``bot/app.py`` stays a list of parts."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.catchup import Catchup, CatchupConfig
from bot.catchup_command import Catchups
from bot.digests import DigestScheduler
from bot.llm import LLM
from bot.service import ChatService
from bot.settings import Settings
from memory.store import Store
from memory.tokens import Tokenizer

__all__ = ["attach_catchup"]


def attach_catchup(service: ChatService, settings: Settings, store: Store, llm: LLM,
                   tokenizer: Tokenizer) -> None:
    """Give ``service`` its ``catchups`` and ``digests`` (the scheduler is not started)."""
    config = CatchupConfig(
        context_tokens=settings.context_tokens,
        reply_tokens=settings.reply_tokens,
        parallel=max(1, settings.llm_concurrency * 2),
    )
    catchups = Catchups(Catchup(store, llm, tokenizer, config), store, ZoneInfo(settings.timezone))
    service.catchups = catchups
    service.digests = DigestScheduler(store, catchups, default_zone=settings.timezone,
                                      payer=lambda key: service.quota.bill(key, "digest"))
