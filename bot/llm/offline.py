"""``OfflineLLM``: the zero-configuration stand-in for a language model.

No network, deterministic. Summaries are extractive (``memory.extractive``, reading the
request that ``memory.summarizer`` built); replies say plainly that no model is configured,
how to configure one, and what the bot remembers. Settings pick it
only when no provider was asked for; it is never a silent fallback.

Background summaries pass through a ``bot.llm.gate.LLMGate`` of ``summary_concurrency``
slots (``SUMMARY_CONCURRENCY``) and yield to the event loop before giving their slot back,
so a burst of compactions runs at most that many CPU-bound summaries per loop iteration.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from bot.errors import LLMBadResponse
from bot.llm.client import Completion, Usage, UsageMeter, _check_purpose
from bot.llm.gate import LLMGate
from memory.completion import ChatMessage
from memory.tokens import Tokenizer

__all__ = ["NO_MODEL", "OfflineLLM"]

NO_MODEL = "No language model is configured"
_SUMMARY_PURPOSES = ("summary", "digest")
_SPACE = re.compile(r"\s")
_MEMORY_BLOCK = re.compile(r"<<<MEMORY[^\n]*\n?(.*?)\n?MEMORY>>>", re.DOTALL)


def _after_preamble(block: str) -> str:
    """The remembered part of a memory fence: from its first ``##`` heading on."""
    lines = block.strip().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## "):
            return "\n".join(lines[i:]).strip()
    return ""


class OfflineLLM:
    """``LLM`` without a network, deterministic, so the bot runs with zero configuration.

    Summaries are extractive (``memory.extractive``, reading the request the summarizer
    built); replies say that no model is configured, how to configure one, and what the bot
    remembers. Never chosen silently when a real provider was asked for (settings decide).
    """

    is_offline = True

    def __init__(
        self, tokenizer: Tokenizer, meter: UsageMeter | None = None, summary_concurrency: int = 8
    ) -> None:
        self.name = "offline"
        self._tokenizer = tokenizer
        self._meter = meter
        self.gate = LLMGate(summary_concurrency, summary_slots=summary_concurrency)

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> Completion:
        """An extractive summary (``summary``/``digest``) or the no-model reply, within
        ``max_tokens``."""
        _check_purpose(purpose)
        if purpose != "summary":
            return self._complete(messages, max_tokens, purpose)
        return await self.gate.run(purpose, lambda: self._summarize(messages, max_tokens))

    async def _summarize(self, messages: Sequence[ChatMessage], max_tokens: int) -> Completion:
        done = self._complete(messages, max_tokens, "summary")
        await asyncio.sleep(0)  # still holding the slot: the next summaries wait a loop turn
        return done

    def _complete(
        self, messages: Sequence[ChatMessage], max_tokens: int, purpose: str
    ) -> Completion:
        started = time.monotonic()
        if purpose in _SUMMARY_PURPOSES:
            text = self._summary(messages, max_tokens)
        else:
            text = self._tokenizer.truncate(self._reply(messages), max_tokens)
        if not text.strip():
            if self._meter is not None:
                self._meter.record_error(purpose, self.name, time.monotonic() - started)
            raise LLMBadResponse("the offline summarizer found nothing to keep")
        count = self._tokenizer.count
        usage = Usage(sum(count(m["content"]) for m in messages), count(text))
        if self._meter is not None:
            self._meter.record(purpose, self.name, usage, time.monotonic() - started)
        return Completion(text, usage, self.name)

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[str]:
        """The same text as ``complete``, in three chunks (so streaming paths get exercised)."""
        text = (await self.complete(messages, max_tokens=max_tokens, purpose=purpose)).text
        cuts = sorted({0, *(_space_after(text, len(text) * i // 3) for i in (1, 2)), len(text)})
        for start, end in itertools.pairwise(cuts):
            yield text[start:end]

    async def probe(self) -> str:
        """For ``gistbot doctor``."""
        return "offline: no language model configured (extractive summaries, canned replies)"

    async def aclose(self) -> None:
        """Nothing to close."""

    def _summary(self, messages: Sequence[ChatMessage], max_tokens: int) -> str:
        # Imported here: only the offline summary path needs memory's summarizer.
        from memory.summarizer import parse_summary_request

        try:
            req = parse_summary_request(messages)
        except ValueError as exc:  # not built by memory.summarizer: a caller's bug
            raise LLMBadResponse(f"offline summarizer cannot read the request: {exc}") from exc
        # Our own canned replies carry nothing worth remembering.
        blocks = [(who, text) for who, text in req.blocks if not text.startswith(NO_MODEL)]
        from memory.extractive import extractive_summary

        bound = min(max_tokens, req.max_tokens) if req.max_tokens else max_tokens
        text = extractive_summary(
            req.previous, req.facts, blocks, max_tokens=bound, tokenizer=self._tokenizer
        )
        return self._tokenizer.truncate(text, bound)

    def _reply(self, messages: Sequence[ChatMessage]) -> str:
        blocks = (_MEMORY_BLOCK.search(m["content"]) for m in messages)
        found = next((b for b in blocks if b), None)
        # Show what is remembered, not the fence's preamble.
        memory = _after_preamble(found.group(1)) if found else ""
        # People's messages: not the bot's own replies, not the memory block.
        recent = sum(1 for m in messages
                     if m["role"] == "user" and not _MEMORY_BLOCK.search(m["content"]))
        lines = [
            f"{NO_MODEL}, so I can't give you a real answer. To use one, "
            "set OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server), "
            "then restart me.",
            "",
        ]
        if memory:
            excerpt = self._tokenizer.truncate(memory, 80)
            shown = [line for line in excerpt.splitlines() if line.strip()]
            more = ["> …"] if excerpt != memory or len(shown) > 8 else []
            lines += ["What I remember of this conversation:", *(f"> {x}" for x in shown[:8])]
            lines += more
        else:
            lines.append("There is no summary of this conversation yet.")
        lines.append(f"I can also see {recent} recent message{'s' if recent != 1 else ''}.")
        return "\n".join(lines)


def _space_after(text: str, at: int) -> int:
    """The index just after the first whitespace at or after ``at`` (a clean chunk cut)."""
    match = _SPACE.search(text, at)
    return match.end() if match else len(text)
