"""``ChatService``: what happens on a message, on ``/summary`` and on ``/reset``.

A message is recorded first (so it is never lost, whatever the model does), then, if the bot
is addressed, the reply is built from a committed memory view read *through that message's
seq* and sent to the LLM. The reply is recorded as an ``assistant`` turn with the message id
``reply:<trigger id>``, so a platform's re-delivery of the same event neither records twice
nor answers twice. Compaction happens in the background (``MemoryManager``) and never
delays a reply — except once, on purpose, when the model says the prompt was too long.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.errors import ContextLengthExceeded, LLMError
from bot.llm import LLM
from bot.messages import CommandResult, IncomingMessage, Reply
from bot.prompts import build_messages, fixed_overhead
from memory.completion import ChatMessage
from memory.manager import MemoryManager
from memory.models import ChannelKey, ChannelStats, MemoryView, NewTurn

__all__ = ["ChatService", "ServiceConfig"]

log = logging.getLogger(__name__)
DeltaSink = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """The settings the service needs (a slice of ``Settings``, easy to build in tests)."""

    system_prompt: str
    context_tokens: int = 8000
    reply_tokens: int = 800
    record_mode: str = "all"  # "all" or "addressed"
    always_reply_channels: Collection[str] = ()
    bot_id: str = "gistbot"
    bot_name: str = "gistbot"


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def footer(stats: ChannelStats) -> str:
    """The counts line under ``/summary``."""
    return (
        f"Remembering {stats.turns} messages ({stats.folded} summarized, {stats.pending} "
        f"verbatim) · {stats.facts} carried facts · last compaction: "
        f"{_when(stats.last_compacted_at)}"
    )


class ChatService:
    """The application core; adapters call it, it calls memory and the LLM."""

    def __init__(self, memory: MemoryManager, llm: LLM, config: ServiceConfig) -> None:
        self.memory = memory
        self.llm = llm
        self.config = config
        self._identities: dict[str, tuple[str, str]] = {}

    def set_identity(self, platform: str, bot_id: str, bot_name: str) -> None:
        """Record who the bot is on ``platform`` (after login), for its assistant turns.

        Per platform, because one process may run Discord and Slack at once.
        """
        self._identities[platform] = (bot_id, bot_name)

    def identity(self, platform: str) -> tuple[str, str]:
        """(bot id, bot name) on ``platform``; the configured defaults until login."""
        return self._identities.get(platform, (self.config.bot_id, self.config.bot_name))

    def should_reply(self, msg: IncomingMessage) -> bool:
        """Mentioned, DM'd, replied to, or in a channel configured to always reply."""
        return (
            msg.mentions_bot
            or msg.is_direct
            or msg.reply_to_bot
            or msg.key.channel in self.config.always_reply_channels
        )

    def memory_budget(self) -> int:
        """Tokens left for summary, facts and turns once the fixed parts are paid for."""
        fixed = fixed_overhead(self.config.system_prompt, self.memory.tokenizer)
        return self.config.context_tokens - self.config.reply_tokens - fixed

    async def on_message(
        self, msg: IncomingMessage, *, on_delta: DeltaSink | None = None
    ) -> Reply | None:
        """Record ``msg``; return the reply when the bot is addressed, else ``None``.

        With ``on_delta`` the reply is streamed: it is called with the text so far as it
        grows (the adapter decides how often to show it).
        """
        addressed = self.should_reply(msg)
        if self.config.record_mode == "addressed" and not addressed:
            return None
        result = await self.memory.record(
            NewTurn(
                msg.key,
                msg.message_id,
                "user",
                msg.author_id,
                msg.author_name,
                msg.text,
                0,
                msg.sent_at,
            )
        )
        if not addressed or not result.created:
            return None  # not for us, or a re-delivery we already answered
        return await self._reply(msg, result.turn.seq, on_delta)

    async def _reply(self, msg: IncomingMessage, seq: int, on_delta: DeltaSink | None) -> Reply:
        budget = self.memory_budget()
        view = await self.memory.view(msg.key, budget, through_seq=seq)
        try:
            text = await self._generate(view, on_delta)
        except ContextLengthExceeded:
            log.warning("context length exceeded in %s; compacting and retrying once", msg.key)
            try:
                await self.memory.compact_now(msg.key, force=True)
            except Exception:
                log.warning("forced compaction of %s failed", msg.key, exc_info=True)
            view = await self.memory.view(msg.key, budget // 2, through_seq=seq)
            try:
                text = await self._generate(view, on_delta)
            except LLMError as e:
                return self._failure(msg, e)
        except LLMError as e:
            return self._failure(msg, e)
        bot_id, bot_name = self.identity(msg.key.platform)
        reply_id = f"reply:{msg.message_id}"
        await self.memory.record(
            NewTurn(msg.key, reply_id, "assistant", bot_id, bot_name, text, 0, time.time())
        )
        return Reply(text, truncated_memory=view.dropped > 0 or view.truncated)

    async def _generate(self, view: MemoryView, on_delta: DeltaSink | None) -> str:
        messages: list[ChatMessage] = build_messages(self.config.system_prompt, view)
        if on_delta is None:
            completion = await self.llm.complete(
                messages, max_tokens=self.config.reply_tokens, purpose="reply"
            )
            return completion.text
        parts: list[str] = []
        async for delta in self.llm.stream(
            messages, max_tokens=self.config.reply_tokens, purpose="reply"
        ):
            parts.append(delta)
            await on_delta("".join(parts))
        text = "".join(parts).strip()
        if not text:
            raise LLMError("empty streamed reply")
        return text

    @staticmethod
    def _failure(msg: IncomingMessage, error: LLMError) -> Reply:
        log.error("reply in %s failed: %s", msg.key, error, exc_info=error)
        return Reply(error.user_message, failed=True)

    async def summary(self, key: ChannelKey) -> CommandResult:
        """``/summary``: the conversation so far (stored state unchanged) and counts."""
        digest = await self.memory.digest(key)
        if digest.empty:
            return CommandResult("Nothing to summarize yet: I have no messages from this channel.")
        note = (
            ""
            if digest.fresh
            else "\n_(The summary model is unavailable; this is the stored summary.)_"
        )
        return CommandResult(f"{digest.text.strip()}{note}\n\n— {footer(digest.stats)}")

    async def reset(
        self, key: ChannelKey, *, allowed: bool, refusal: str | None = None
    ) -> CommandResult:
        """``/reset``: forget the channel if the caller may; say what was deleted.

        ``refusal`` lets the adapter say who may reset on its platform.
        """
        if not allowed:
            return CommandResult(
                refusal or "You are not allowed to reset this channel's memory.", ok=False
            )
        result = await self.memory.reset(key)
        if not result.turns and not result.had_summary and not result.facts:
            return CommandResult("There was nothing to forget: I had no memory of this channel.")
        parts = [f"{result.turns} messages"]
        if result.had_summary:
            parts.append("the summary")
        if result.facts:
            parts.append(f"{result.facts} carried facts")
        return CommandResult(f"Done: I forgot {', '.join(parts)} from this channel.")

    async def edited(self, key: ChannelKey, message_id: str, text: str) -> None:
        """A platform edit: update the turn if it is not summarized yet."""
        outcome = await self.memory.edit(key, message_id, text)
        log.debug("edit of %s in %s: %s", message_id, key, outcome)

    async def deleted(self, key: ChannelKey, message_id: str) -> None:
        """A platform delete: remove the turn if it is not summarized yet."""
        outcome = await self.memory.delete(key, message_id)
        log.debug("delete of %s in %s: %s", message_id, key, outcome)
