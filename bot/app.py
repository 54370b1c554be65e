"""Wire the parts together from ``Settings``: storage → memory → LLM → service.

Everything is created here and passed in (constructor injection); nothing is global. Use::

    async with Runtime.open(settings) as rt:
        received = await rt.service.receive(...)

The service is the message pipeline only; what the platforms and the commands use beside
it is ``rt.features`` (``bot.parts``), each part built here once.

Leaving the block lets running compactions finish briefly, then closes the LLM client and
the store (which flushes queued writes).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from bot.access import AccessRules
from bot.attachments.describe import ImageDescriber
from bot.attachments.intake import AttachmentIntake
from bot.catchup.wiring import CatchupCommands, build_catchup
from bot.channels.config import ChannelConfig, Defaults
from bot.channels.config_command import ConfigCommand
from bot.channels.quota import Quota
from bot.conversation.budget import Budget, window_policy
from bot.conversation.outbox import Outbox
from bot.conversation.service import ChatService
from bot.conversation.summary_route import SummaryRouter
from bot.features import registry as feature_registry
from bot.features.runtime import RunningFeatures
from bot.llm.client import LLM, OpenAILLM, UsageMeter
from bot.llm.embeddings import OpenAIEmbedder
from bot.llm.gate import LLMGate
from bot.llm.offline import OfflineLLM
from bot.llm.providers import DEFAULT, ProviderRouter
from bot.memory_commands.feature import MemoryCommands
from bot.missed.owed import OwedReplies
from bot.ops.observe import Observers
from bot.ops.shutdown import compaction_grace
from bot.parts import Features
from bot.plugins import configured_platforms, is_direct, platform_names
from bot.settings import Settings
from bot.storage import make_storage, storage_for_url
from bot.stores import Storage
from memory.embedding_indexer import EmbeddingIndexer
from memory.manager import MemoryManager
from memory.models import ChannelKey
from memory.semantic import SemanticRecall
from memory.store import Store
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter

__all__ = ["Runtime", "make_embedder", "make_llm", "make_storage", "storage_for_url"]

log = logging.getLogger(__name__)


def make_llm(settings: Settings, tokenizer: TokenCounter, meter: UsageMeter) -> LLM:
    """``OpenAILLM`` for a configured endpoint, a ``ProviderRouter`` over several when
    ``PROVIDERS`` names some; ``OfflineLLM`` only when none was asked for."""
    llm = settings.llm
    if settings.model_provider == "offline":
        return OfflineLLM(tokenizer, meter=meter, summary_concurrency=llm.summary_concurrency)
    key = llm.openai_api_key.get_secret_value() if llm.openai_api_key else None
    named = settings.providers.providers
    if not named:
        return _endpoint(settings, meter, tokenizer, key, llm.openai_base_url, llm.model_name,
                         llm.summary_model_name, llm.llm_concurrency)
    endpoints, wanted = {}, make_wanted(settings)
    if llm.openai_api_key or llm.openai_base_url:
        endpoints[DEFAULT] = _endpoint(settings, meter, tokenizer, key, llm.openai_base_url,
                                       llm.model_name, llm.summary_model_name,
                                       llm.llm_concurrency)
    for name, p in named.items():
        endpoints[name] = _endpoint(
            settings, meter, tokenizer, p.api_key.get_secret_value() if p.api_key else None,
            p.base_url, p.models[0], None, p.concurrency or llm.llm_concurrency)
    served = {m: name for name, p in named.items() for m in p.models}
    return ProviderRouter(endpoints, served, model=llm.model_name,
                          summary_model=llm.summary_model_name, wanted=wanted)


def make_wanted(settings: Settings) -> dict[str, list[tuple[str, str]]]:
    """Per endpoint, the (setting, model) pairs it must serve: ``MODEL_NAME`` and
    ``SUMMARY_MODEL_NAME`` where they are routed, and each provider's own models."""
    llm, named = settings.llm, settings.providers
    wanted: dict[str, list[tuple[str, str]]] = {}
    for var, model in (("MODEL_NAME", llm.model_name),
                       ("SUMMARY_MODEL_NAME", llm.summary_model_name or llm.model_name)):
        pair = (var, model)
        bucket = wanted.setdefault(named.provider_of(model) or DEFAULT, [])
        if model not in {m for _, m in bucket}:
            bucket.append(pair)
    for name, p in named.providers.items():
        bucket = wanted.setdefault(name, [])
        bucket += [(f"PROVIDERS {name}", m) for m in p.models if m not in {m for _, m in bucket}]
    return wanted


def _endpoint(settings: Settings, meter: UsageMeter, tokenizer: TokenCounter, key: str | None,
              base_url: str | None, model: str, summary_model: str | None,
              concurrency: int) -> OpenAILLM:
    """One endpoint's client with the settings every endpoint shares."""
    llm, named = settings.llm, settings.providers
    return OpenAILLM(
        api_key=key,
        base_url=base_url,
        model=model,
        summary_model=summary_model,
        timeout=llm.llm_timeout,
        max_retries=llm.llm_max_retries,
        meter=meter,
        concurrency=concurrency,
        summary_concurrency=llm.summary_concurrency,
        summary_timeout=llm.summary_timeout,
        tokenizer=tokenizer,
        params=named.model_params,
        summary_params=named.summary_model_params,
    )


def make_embedder(settings: Settings, model: LLM, quota: Quota, meter: UsageMeter
                  ) -> OpenAIEmbedder | None:
    """The embedding client ``EMBEDDING_MODEL`` asks for, on the model's endpoint and
    behind its gate (None: semantic recall is off)."""
    llm = settings.llm
    if not llm.embedding_model:
        return None
    key = llm.openai_api_key.get_secret_value() if llm.openai_api_key else None
    gate = getattr(model, "gate", None)
    return OpenAIEmbedder(
        api_key=key,
        base_url=llm.openai_base_url,
        model=llm.embedding_model,
        gate=gate if isinstance(gate, LLMGate) else LLMGate(llm.llm_concurrency),
        quota=quota,
        meter=meter,
        timeout=llm.llm_timeout,
        max_retries=llm.llm_max_retries,
        tokenizer=TokenCounter(llm.embedding_model),
    )


@dataclass
class Runtime:
    """The running application's parts, for adapters and the CLI."""

    settings: Settings
    budget: Budget
    storage: Storage
    memory: MemoryManager
    llm: LLM
    service: ChatService
    meter: UsageMeter
    features: Features  # what the platforms and the commands are handed (bot.parts)

    @property
    def store(self) -> Store:
        """The memory store (``storage.memory``)."""
        return self.storage.memory

    @property
    def installed_platforms(self) -> tuple[str, ...]:
        """The platforms installed (each is a metrics label)."""
        return platform_names()

    @property
    def configured_platforms(self) -> list[str]:
        """The installed platforms the settings start (``/readyz`` waits for each)."""
        return configured_platforms(self.settings)

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        *,
        llm: LLM | None = None,
        start_background: bool = True,
        warn_offline: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> AsyncIterator[Runtime]:
        """Build and start everything; close it all on exit, whatever happened.

        ``warn_offline=False`` when the caller tells the person itself that the model is
        offline (the console's banner), so no log line says it again. ``clock`` is the
        service's (the per-person rate limit reads it).
        """
        tokenizer = TokenCounter(settings.llm.model_name)
        budget = Budget.compute(settings.budget, settings.chat.system_prompt, tokenizer)
        meter = UsageMeter()
        model = llm or make_llm(settings, tokenizer, meter)
        storage = make_storage(settings)
        await storage.open()
        embedder: OpenAIEmbedder | None = None
        try:
            # per-channel settings and quotas (bot.channels.config, bot.channels.quota)
            channels = ChannelConfig(storage.settings, Defaults.from_settings(
                settings, feature_registry.CONFIG_KEYS))
            quota = Quota(storage.usage, settings_of=channels.get, direct=is_direct)
            embedder = make_embedder(settings, model, quota, meter)
            memory = _memory(settings, storage, model, tokenizer, budget, channels, quota,
                             embedder)
            parts = _serving(settings, budget, storage, model, tokenizer, channels, quota,
                             memory, clock)
            if start_background:
                await parts.start()
            if model.is_offline and warn_offline:
                log.warning("no language model configured: replying with the offline model "
                            "(set OPENAI_API_KEY or OPENAI_BASE_URL to use a real one)")
            try:
                yield cls(settings, budget, storage, memory, model, parts.features.service,
                          meter, parts.features)
            finally:
                await parts.close(settings)
        finally:
            for client in (model, embedder):
                with contextlib.suppress(Exception):
                    aclose = getattr(client, "aclose", None)
                    if aclose is not None:
                        await aclose()
            await storage.close()


def _memory(settings: Settings, storage: Storage, model: LLM, tokenizer: TokenCounter,
            budget: Budget, channels: ChannelConfig, quota: Quota,
            embedder: OpenAIEmbedder | None) -> MemoryManager:
    """The memory over ``storage``: its summarizer on the channel's model, the window
    policy, and semantic recall when an embedder is configured."""
    store = storage.memory
    summarizer = Summarizer(
        model,
        tokenizer,
        summary_tokens=budget.summary_tokens,
        # The endpoint enforces SUMMARY_TIMEOUT per request, from when the call gets
        # its slot; the offline model needs none. No outer timeout that would count
        # the wait behind replies.
        timeout=None,
        router=SummaryRouter(model, channels, quota),
    )
    return MemoryManager(
        store, summarizer, tokenizer, window_policy(settings.memory, budget),
        config=settings.memory,
        semantic=None if embedder is None else SemanticRecall(
            store, embedder, timeout=settings.llm.embedding_timeout),
        indexer=None if embedder is None else EmbeddingIndexer(store, embedder),
    )


def _serving(settings: Settings, budget: Budget, storage: Storage, model: LLM,
             tokenizer: TokenCounter, channels: ChannelConfig, quota: Quota,
             memory: MemoryManager, clock: Callable[[], float]) -> _Parts:
    """The chat service and the features beside it, each handed what it needs; not
    started yet."""
    restarts = settings.restarts
    owed = OwedReplies(storage.owed, claim_seconds=restarts.reply_claim_seconds,
                       answer_missed_seconds=restarts.answer_missed_seconds)
    access = AccessRules(settings.access)
    catchup = build_catchup(settings, budget, storage, model, tokenizer, quota,
                            channels=channels, access=access)
    attachments = AttachmentIntake(memory, settings.attachments)
    model_name = settings.llm.model_name
    if not model.is_offline and attachments.sees(model_name):
        attachments.describe = ImageDescriber(model, quota, model_name)
    observers = Observers()

    async def setting(key: ChannelKey, name: str) -> str:
        return (await channels.get(key)).value(name)

    running = feature_registry.start(storage, tokenizer, setting)
    service = ChatService(memory, model, settings.chat, budget, clock=clock, owed=owed,
                          channels=channels, quota=quota, access=access,
                          attachments=attachments, observer=observers, features=running)
    features = Features(
        service, channels, quota, access, Outbox(storage.outbox), attachments, observers, owed,
        MemoryCommands(memory, channels, quota), ConfigCommand(channels, quota), catchup,
        running)
    return _Parts(channels, quota, memory, owed, catchup, features, running)


@dataclass
class _Parts:
    """The parts of a runtime that work in the background or hold resources: started in
    this order, closed in the reverse."""

    channels: ChannelConfig
    quota: Quota
    memory: MemoryManager
    owed: OwedReplies
    catchup: CatchupCommands
    features: Features
    running: RunningFeatures  # the features' own objects and jobs (bot.features)

    async def start(self) -> None:
        """Start compaction, the channel settings' refresh, owed replies, digests and the
        features' own work."""
        await self.memory.start()
        await self.channels.start()
        self.owed.start()
        if self.catchup.digests is not None:
            self.catchup.digests.start()
        await self.running.start()

    async def close(self, settings: Settings) -> None:
        """Stop them all, letting running compactions finish within the shutdown grace."""
        await self.running.close()
        if self.catchup.digests is not None:
            await self.catchup.digests.stop()
        await self.features.attachments.close()
        await self.owed.close()
        await self.channels.close()
        await self.memory.close(grace=compaction_grace(settings.restarts.shutdown_grace_seconds))
        await self.quota.close()  # after the last summary: its count is written too
