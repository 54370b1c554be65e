"""Several model endpoints behind one ``LLM``: the channel's model picks the endpoint.

``PROVIDERS`` names endpoints (base URL, key, the models each serves); ``OPENAI_BASE_URL`` /
``OPENAI_API_KEY`` stay the default endpoint for every model no provider lists. A call
goes to the endpoint of the model it is for (``MODEL_NAME``, ``SUMMARY_MODEL_NAME`` or the
channel's ``/config`` choice), through that endpoint's own ``OpenAILLM``: its own client and
key, its own gate (``bot.llm.gate``: slots, replies first, preemption), so a slow or dead
local server holds no slot a hosted one needs. Metering is the same for all: the shared
``UsageMeter`` and the payer open in the caller's context (``bot.channels.usage_tab``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from bot.errors import ModelNotServed
from bot.llm.client import Completion, OpenAILLM, _check_purpose
from bot.llm.gate import LLMGate
from memory.completion import ChatMessage

__all__ = ["DEFAULT", "ProviderRouter"]

DEFAULT = "default"  # the endpoint of OPENAI_BASE_URL / OPENAI_API_KEY


class ProviderRouter:
    """``LLM`` over named endpoints: ``endpoints`` by name (``DEFAULT`` for the default one,
    absent when only ``PROVIDERS`` are configured), ``served`` maps a model to its endpoint's
    name (models not in it go to ``DEFAULT``)."""

    is_offline = False

    def __init__(self, endpoints: Mapping[str, OpenAILLM], served: Mapping[str, str], *,
                 model: str, summary_model: str | None = None,
                 wanted: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> None:
        if not endpoints:
            raise ValueError("a router needs at least one endpoint")
        self.endpoints, self.served = dict(endpoints), dict(served)
        # (setting, model) pairs each endpoint must serve, for ``probe``
        self.wanted = {name: list(pairs) for name, pairs in (wanted or {}).items()}
        self.model, self.summary_model = model, summary_model or model
        self.name = f"openai:{model}"

    @property
    def gate(self) -> LLMGate:
        """The default endpoint's gate (embeddings are requested there), else the reply
        model's."""
        return self.endpoint_for(self.model)[1].gate

    def model_for(self, purpose: str, model: str | None = None) -> str:
        """The model that serves ``purpose`` (``model`` when a channel chose one)."""
        _check_purpose(purpose)
        if model:
            return model
        return self.model if purpose == "reply" else self.summary_model

    def endpoint_for(self, model: str) -> tuple[str, OpenAILLM]:
        """The endpoint that serves ``model``, by name; ``ModelNotServed`` if none does."""
        name = self.served.get(model, DEFAULT)
        endpoint = self.endpoints.get(name)
        if endpoint is None:
            raise ModelNotServed(f"no provider serves the model {model!r}; list it in a "
                                 "PROVIDERS entry's models or set OPENAI_BASE_URL")
        return name, endpoint

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One completion from the endpoint of the model it is for."""
        chosen = self.model_for(purpose, model)
        return await self.endpoint_for(chosen)[1].complete(
            messages, max_tokens=max_tokens, purpose=purpose, model=chosen, params=params)

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[str]:
        """Text deltas from the endpoint of the model they are for."""
        chosen = self.model_for(purpose, model)
        pieces = self.endpoint_for(chosen)[1].stream(
            messages, max_tokens=max_tokens, purpose=purpose, model=chosen, params=params)
        async with contextlib.aclosing(pieces):
            async for piece in pieces:
                yield piece

    async def probe_endpoint(self, name: str) -> str:
        """One line about endpoint ``name`` for ``gistbot doctor``: reachable, and serving
        the models routed to it; raises ``LLMError``."""
        return await self.endpoints[name].probe(self.wanted.get(name))

    async def probe(self) -> str:
        """One line for all endpoints; raises at the first that fails."""
        return "; ".join([f"{name}: {await self.probe_endpoint(name)}"
                          for name in self.endpoints])

    async def aclose(self) -> None:
        """Close every endpoint's connections."""
        for endpoint in self.endpoints.values():
            await endpoint.aclose()
