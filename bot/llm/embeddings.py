"""Embeddings for semantic recall (``EMBEDDING_MODEL``) from the OpenAI-compatible endpoint.

``OpenAIEmbedder`` is ``memory.semantic.TextEmbedder`` over ``/v1/embeddings`` (OpenAI,
Ollama, llama.cpp ``--embedding``, vLLM …) through the official ``openai`` SDK, with the
settings' base URL and key. Every call passes through the LLM gateway like a model call:
it is metered on the channel's server as kind ``embedding`` (``bot.channels.quota``; a direct
message's background work is nobody's, as for summaries), and a background batch
(``index``) takes an endpoint slot as background work, after every waiting reply and
preemptible by one (``bot.llm.gate``). A reply's message (``query``) takes no slot: it is
one short input bounded by ``EMBEDDING_TIMEOUT``, and waiting behind a streaming reply
would only make it time out. Failures become ``bot.errors.LLMError``s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import openai
from openai import AsyncOpenAI

from bot.channels.quota import Quota
from bot.channels.usage_tab import metered, note_usage, paying
from bot.errors import LLMBadResponse, LLMError, llm_error_from
from bot.llm.client import Usage, UsageMeter
from bot.llm.cost import text_cost
from bot.llm.gate import LLMGate
from memory.models import ChannelKey
from memory.tokens import Tokenizer

__all__ = ["OpenAIEmbedder"]

_OPENAI_URL = "https://api.openai.com/v1"
_NO_KEY = "no-key-required"  # local servers ignore it; the SDK insists on one
PURPOSES = ("query", "index")


class OpenAIEmbedder:
    """``TextEmbedder`` over an OpenAI-compatible embeddings endpoint (module docstring)."""

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        model: str,
        gate: LLMGate,
        quota: Quota | None = None,
        meter: UsageMeter | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.model, self.gate, self.quota, self.meter = model, gate, quota, meter
        self.tokenizer = tokenizer  # prices a batch for its quota reservation
        self._client = AsyncOpenAI(api_key=api_key or _NO_KEY, base_url=base_url or _OPENAI_URL,
                                   timeout=timeout, max_retries=max_retries)

    async def embed(self, key: ChannelKey, texts: Sequence[str], *, purpose: str
                    ) -> list[list[float]]:
        """One vector per text; ``purpose`` ``query`` (the reply path) or ``index``."""
        if purpose not in PURPOSES:
            raise ValueError(f"purpose must be one of {PURPOSES}, not {purpose!r}")
        batch = list(texts)
        payer = self.quota.bill(key, "embedding") if self.quota is not None else None
        with paying(payer):
            def cost() -> int:
                return text_cost(batch, self.tokenizer)

            if purpose == "query":
                return await metered("query", lambda: self._create(batch), cost=cost)
            return await metered("embedding", lambda: self.gate.run(
                "embedding", lambda: self._create(batch)), cost=cost)

    async def _create(self, texts: list[str]) -> list[list[float]]:
        started = time.monotonic()
        try:
            try:
                response = await self._client.embeddings.create(
                    model=self.model, input=texts, encoding_format="float")
            except (openai.OpenAIError, ValueError) as exc:  # ValueError: body not JSON
                raise llm_error_from(exc) from exc
            data = sorted(getattr(response, "data", None) or [], key=lambda d: d.index)
            if len(data) != len(texts):
                raise LLMBadResponse(f"asked for {len(texts)} embeddings, got {len(data)}")
            vectors = [list(d.embedding) for d in data]
        except LLMError as e:
            if self.meter is not None:
                self.meter.record_error("embedding", self.model, time.monotonic() - started,
                                        type(e).__name__)
            raise
        reported = getattr(response.usage, "prompt_tokens", None)
        tokens = reported if isinstance(reported, int) else 0
        # a server that reports no usage: the quotas count the batch's estimate
        note_usage(tokens if isinstance(reported, int) else text_cost(texts, self.tokenizer), 0)
        if self.meter is not None:
            self.meter.record("embedding", self.model, Usage(tokens, 0),
                              time.monotonic() - started)
        return vectors

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()
