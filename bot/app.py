"""Wire the parts together from ``Settings``: store → memory → LLM → service.

Everything is created here and passed in (constructor injection); nothing is global. Use::

    async with Runtime.open(settings) as rt:
        received = await rt.service.receive(...)

Leaving the block lets running compactions finish briefly, then closes the LLM client and
the store (which flushes queued writes).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from bot.attachments import Limits
from bot.attachments.describe import ImageDescriber
from bot.attachments.intake import AttachmentIntake
from bot.budget import window_policy
from bot.catchup_wiring import build_catchup
from bot.channel_config import ChannelConfig, Defaults
from bot.embeddings import OpenAIEmbedder
from bot.errors import ConfigError
from bot.extras import POSTGRES, require
from bot.llm import LLM, OpenAILLM, UsageMeter
from bot.llm_gate import LLMGate
from bot.offline_llm import OfflineLLM
from bot.outbox import Outbox, OutboxStore
from bot.owed import OwedReplies
from bot.quota import Quota
from bot.service import ChatService, ServiceConfig
from bot.settings import Settings
from bot.shutdown import compaction_grace
from bot.summary_route import SummaryRouter
from memory.config import MemoryConfig
from memory.embedding_indexer import EmbeddingIndexer
from memory.manager import MemoryManager
from memory.semantic import SemanticRecall
from memory.store import Store
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter

__all__ = ["Runtime", "make_embedder", "make_llm", "make_store", "store_for_url"]

log = logging.getLogger(__name__)


def make_store(settings: Settings) -> Store:
    """The store ``DATABASE_URL`` asks for (SQLite by default)."""
    store = store_for_url(
        settings.database_url,
        synchronous=settings.sqlite_synchronous,
        pool_size=settings.database_pool_size,
    )
    store.summary_history = settings.summary_history  # type: ignore[attr-defined]
    return store


def store_for_url(url: str, *, synchronous: str = "FULL", pool_size: int = 10) -> Store:
    """A store for ``sqlite:///path`` or ``postgresql://…`` (``copy-db`` takes two)."""
    if url.startswith("sqlite:///"):
        return SqliteStore(url[len("sqlite:///") :], synchronous=synchronous)  # type: ignore[arg-type]
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"{url!r}: use sqlite:///path/to/file.db or postgresql://user@host/db")
    require(POSTGRES, configured=True)
    from memory.stores.postgres.store import PostgresStore

    dsn, _, schema = url.partition("#")  # a "#schema" suffix selects a schema (tests, hosting)
    store: Store = PostgresStore(dsn, schema=schema or "public", max_size=pool_size)
    return store


def make_llm(settings: Settings, tokenizer: TokenCounter, meter: UsageMeter) -> LLM:
    """``OpenAILLM`` for a configured provider; ``OfflineLLM`` only when none was asked for."""
    if settings.provider == "offline":
        return OfflineLLM(tokenizer, meter=meter, summary_concurrency=settings.summary_concurrency)
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return OpenAILLM(
        api_key=key,
        base_url=settings.openai_base_url,
        model=settings.model_name,
        summary_model=settings.summary_model_name,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
        meter=meter,
        concurrency=settings.llm_concurrency,
        summary_concurrency=settings.summary_concurrency,
        summary_timeout=settings.summary_timeout,
    )


def make_embedder(settings: Settings, model: LLM, quota: Quota, meter: UsageMeter
                  ) -> OpenAIEmbedder | None:
    """The embedding client ``EMBEDDING_MODEL`` asks for, on the model's endpoint and
    behind its gate (None: semantic recall is off)."""
    if not settings.embedding_model:
        return None
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    gate = getattr(model, "gate", None)
    return OpenAIEmbedder(
        api_key=key,
        base_url=settings.openai_base_url,
        model=settings.embedding_model,
        gate=gate if isinstance(gate, LLMGate) else LLMGate(settings.llm_concurrency),
        quota=quota,
        meter=meter,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )


@dataclass
class Runtime:
    """The running application's parts, for adapters and the CLI."""

    settings: Settings
    store: Store
    memory: MemoryManager
    llm: LLM
    service: ChatService
    meter: UsageMeter

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        *,
        llm: LLM | None = None,
        start_background: bool = True,
        warn_offline: bool = True,
    ) -> AsyncIterator[Runtime]:
        """Build and start everything; close it all on exit, whatever happened.

        ``warn_offline=False`` when the caller tells the person itself that the model is
        offline (the console's banner), so no log line says it again.
        """
        tokenizer = TokenCounter(settings.model_name)
        meter = UsageMeter()
        model = llm or make_llm(settings, tokenizer, meter)
        store = make_store(settings)
        await store.open()
        embedder: OpenAIEmbedder | None = None
        try:
            # per-channel settings and quotas (bot.channel_config, bot.quota)
            channels = ChannelConfig(store, Defaults.from_settings(settings))
            quota = Quota(store, settings_of=channels.get)
            summarizer = Summarizer(
                model,
                tokenizer,
                summary_tokens=settings.summary_bound,
                # The endpoint enforces SUMMARY_TIMEOUT per request, from when the call gets
                # its slot; the offline model needs none. No outer timeout that would count
                # the wait behind replies.
                timeout=None,
                router=SummaryRouter(model, channels, quota),
            )
            policy = window_policy(settings, tokenizer)
            embedder = make_embedder(settings, model, quota, meter)
            memory = MemoryManager(
                store,
                summarizer,
                tokenizer,
                policy,
                config=MemoryConfig(
                    summary_tokens=settings.summary_bound,
                    facts_tokens=settings.facts_tokens,
                    recall_tokens=settings.recall_tokens,
                    retention_days=settings.retention_days,
                ),
                semantic=None if embedder is None else SemanticRecall(
                    store, embedder, timeout=settings.embedding_timeout),
                indexer=None if embedder is None else EmbeddingIndexer(store, embedder),
            )
            config = ServiceConfig(
                system_prompt=settings.system_prompt,
                context_tokens=settings.context_tokens,
                reply_tokens=settings.reply_tokens,
                record_mode=settings.record_mode,
                always_reply_channels=frozenset(settings.always_reply_channels),
                user_rate_limit=settings.user_rate_limit,
                max_input_chars=settings.max_input_chars,
            )
            owed = OwedReplies(store, claim_seconds=settings.reply_claim_seconds,
                               answer_missed_seconds=settings.answer_missed_seconds)
            catchup = build_catchup(settings, store, model, tokenizer, quota)
            outbox = Outbox(store if isinstance(store, OutboxStore) else None)
            service = ChatService(memory, model, config, owed=owed, channels=channels,
                                  quota=quota, outbox=outbox, catchup=catchup)
            service.attachments = AttachmentIntake(memory, Limits(
                max_chars=settings.attachment_max_chars,
                max_bytes=settings.attachment_max_bytes,
                timeout=settings.attachment_timeout,
            ), vision=settings.vision, vision_models=settings.vision_models)
            if not model.is_offline and service.attachments.sees(settings.model_name):
                service.attachments.describe = ImageDescriber(model, quota, settings.model_name)
            if start_background:
                await memory.start()
                await channels.start()
                owed.start()
            if model.is_offline and warn_offline:
                log.warning(
                    "no language model configured: replying with the offline model "
                    "(set OPENAI_API_KEY or OPENAI_BASE_URL to use a real one)"
                )
            if start_background and catchup.digests is not None:
                catchup.digests.start()
            try:
                yield cls(settings, store, memory, model, service, meter)
            finally:
                if catchup.digests is not None:
                    await catchup.digests.stop()
                await service.attachments.close()
                await owed.close()
                await channels.close()
                await memory.close(grace=compaction_grace(settings.shutdown_grace_seconds))
                await quota.close()  # after the last summary: its count is written too
        finally:
            for client in (model, embedder):
                with contextlib.suppress(Exception):
                    aclose = getattr(client, "aclose", None)
                    if aclose is not None:
                        await aclose()
            await store.close()
