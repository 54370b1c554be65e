"""``ChatService``: what happens on a message, on ``/summary``, ``/reset``, ``/remember``,
``/memory`` and ``/forget``.

A message is recorded first (so it is never lost, whatever the model does), then, if the bot
is addressed, the reply is built from a committed memory view read *through that message's
seq* and sent to the LLM. The reply is recorded as an ``assistant`` turn with the message id
``reply:<trigger id>``, so a platform's re-delivery of the same event neither records twice
nor answers twice. Compaction happens in the background (``MemoryManager``) and never
delays a reply — except once, on purpose, when the model says the prompt was too long.

Limits and faults, each with one defined outcome (SECURITY.md):

* A message longer than ``max_input_chars`` is stored cut, with a visible marker that says
  how much was not kept (never dropped silently); addressed to the bot, it gets a polite
  request for something shorter instead of a model call.
* A person addressing the bot more than ``user_rate_limit`` times a minute (per platform;
  not on the console, which is the operator's own terminal) is told so once; until the
  minute is over further messages are recorded, not answered.
* A store failure is logged once with the channel and message id; the person, if they
  addressed the bot, is told briefly. Nothing half-written remains (the store's
  transactions), and the next message tries again.
* Every reply recalls archive items (long-term facts, episodes) relevant to the message
  (``MemoryManager.view(..., recall=True)``, bounded by ``RECALL_TOKENS``).
* ``/remember`` is for anyone; ``/memory`` is answered to the caller only (the adapters
  send it ephemerally); ``/forget`` needs the same permission as ``/reset``.
* A model answer longer than ``MAX_REPLY_CHARS`` (a broken endpoint; ``REPLY_TOKENS`` keeps
  a working one far below) is cut with a marker.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.errors import (
    ContextLengthExceeded,
    LLMAuthError,
    LLMBadResponse,
    LLMError,
    LLMRateLimited,
    LLMTimeout,
    LLMUnavailable,
)
from bot.llm import LLM
from bot.messages import CommandResult, IncomingMessage, Reply
from bot.prompts import build_messages, fixed_overhead
from memory.completion import ChatMessage
from memory.errors import StoreError, StoreUnavailableError, SummaryRejected
from memory.manager import MemoryManager
from memory.models import ChannelKey, ChannelStats, LongTermFact, MemoryView, NewTurn
from memory.recall import episode_spans, fact_line

__all__ = [
    "MAX_FACT_CHARS",
    "MAX_REPLY_CHARS",
    "RATE_LIMITED",
    "STORE_FAILED",
    "TOO_LONG",
    "ChatService",
    "ServiceConfig",
    "cut",
]

log = logging.getLogger(__name__)
DeltaSink = Callable[[str], Awaitable[None]]

RATE_WINDOW = 60.0  # seconds
MAX_REPLY_CHARS = 40_000  # Slack cuts a message's text beyond this; no sane reply is longer
TOO_LONG = (
    "That message is too long for me ({length:,} characters; I read at most {limit:,}). "
    "I kept the first {limit:,} characters in memory; please ask again in a shorter message."
)
RATE_LIMITED = (
    "You're asking me faster than I can answer (at most {limit} replies a minute). I still "
    "remember what you write; please ask again in a minute."
)
MAX_FACT_CHARS = 1000  # a pinned fact is a statement, not a document
MEMORY_LIST_LIMIT = 50
STORE_FAILED = (
    "Sorry, I couldn't save your message just now, so I can't answer it. "
    "Please try again in a moment."
)


def cut(text: str, limit: int, what: str = "message") -> str:
    """``text`` cut to ``limit`` characters plus a marker saying how many were not kept."""
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[…{what} cut: {len(text) - limit:,} more characters not kept]"


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
    user_rate_limit: int = 0  # replies per user per minute; 0 = no limit
    max_input_chars: int = 0  # 0 = no limit


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


def _listed(fact: LongTermFact) -> str:
    line = fact_line(fact)
    extra = [x for x in ("pinned" if fact.pinned else "", fact.author) if x]
    return f"{line} ({', '.join(extra)})" if extra else line


def digest_failure(error: BaseException | None) -> str:
    """What ``/summary`` says when the summary model failed: what actually happened."""
    if isinstance(error, TimeoutError | LLMTimeout):
        return "The summary model did not answer in time"
    if isinstance(error, SummaryRejected | LLMBadResponse):
        return "The summary model's answer was unusable"
    if isinstance(error, LLMUnavailable | LLMRateLimited):
        return "The summary model could not be reached"
    if isinstance(error, LLMAuthError):
        return "The summary model refused the request (check the API key)"
    return "The summary model failed"


class ChatService:
    """The application core; adapters call it, it calls memory and the LLM."""

    def __init__(self, memory: MemoryManager, llm: LLM, config: ServiceConfig, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.memory = memory
        self.llm = llm
        self.config = config
        self.clock = clock
        self._identities: dict[str, tuple[str, str]] = {}
        # (platform, author id) -> times of recent replies, and whether they were told
        self._recent: dict[tuple[str, str], deque[float]] = {}
        self._told: set[tuple[str, str]] = set()

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
        self,
        msg: IncomingMessage,
        *,
        on_delta: DeltaSink | None = None,
        on_recorded: Callable[[], None] | None = None,
    ) -> Reply | None:
        """Record ``msg``; return the reply when the bot is addressed, else ``None``.

        With ``on_delta`` the reply is streamed: it is called with the text so far as it
        grows (the adapter decides how often to show it). ``on_recorded`` is called once the
        message is durable (or needs no storing), before the reply is generated: an adapter
        that acknowledges deliveries acknowledges then, and withholds the acknowledgement
        when it is never called (the store failed), so the platform delivers again.
        """
        addressed = self.should_reply(msg)
        if self.config.record_mode == "addressed" and not addressed:
            if on_recorded is not None:
                on_recorded()  # nothing to keep
            return None
        limit = self.config.max_input_chars
        # No await before record(): a channel's messages must be queued in arrival order.
        try:
            result = await self.memory.record(
                NewTurn(
                    msg.key,
                    msg.message_id,
                    "user",
                    msg.author_id,
                    msg.author_name,
                    cut(msg.text, limit),
                    0,
                    msg.sent_at,
                )
            )
        except StoreError as e:
            if isinstance(e, StoreUnavailableError):  # the store reports it, once a minute
                log.debug("could not record message %s in %s: %s", msg.message_id, msg.key, e)
            else:
                log.error("could not record message %s in %s: %s", msg.message_id, msg.key, e,
                          exc_info=e)
            return Reply(STORE_FAILED, failed=True) if addressed else None
        if on_recorded is not None:
            on_recorded()
        if not addressed or not result.created:
            return None  # not for us, or a re-delivery we already answered
        if limit and len(msg.text) > limit:
            log.info("message %s in %s is %d characters (limit %d): stored cut, not answered",
                     msg.message_id, msg.key, len(msg.text), limit)
            return Reply(TOO_LONG.format(length=len(msg.text), limit=limit), failed=True)
        if not self._within_rate(msg):
            who = (msg.key.platform, msg.author_id)
            if who in self._told:
                return None  # told once this minute; stay quiet, the message is stored
            self._told.add(who)
            log.info("user %s on %s is over %d replies a minute", msg.author_id,
                     msg.key.platform, self.config.user_rate_limit)
            return Reply(RATE_LIMITED.format(limit=self.config.user_rate_limit), failed=True)
        try:
            return await self._reply(msg, result.turn.seq, on_delta)
        except StoreError as e:
            log.error("reply to %s in %s failed on the store: %s", msg.message_id, msg.key, e,
                      exc_info=e)
            return Reply(STORE_FAILED, failed=True)

    def _within_rate(self, msg: IncomingMessage) -> bool:
        """Count a reply for the author; False when that is over ``user_rate_limit``."""
        limit = self.config.user_rate_limit
        if limit <= 0 or msg.key.platform == "console":  # the operator at their own terminal
            return True
        who = (msg.key.platform, msg.author_id)
        now = self.clock()
        recent = self._recent.setdefault(who, deque())
        while recent and recent[0] <= now - RATE_WINDOW:
            recent.popleft()
        if not recent:
            self._told.discard(who)
        if len(recent) >= limit:
            return False
        recent.append(now)
        if len(self._recent) > 10_000:  # forget idle people, so the map stays small
            for key in [k for k, q in self._recent.items() if not q or q[-1] <= now - RATE_WINDOW]:
                del self._recent[key]
                self._told.discard(key)
        return True

    async def _reply(self, msg: IncomingMessage, seq: int, on_delta: DeltaSink | None) -> Reply:
        budget = self.memory_budget()
        view = await self.memory.view(msg.key, budget, through_seq=seq, recall=True)
        try:
            text = await self._generate(view, on_delta)
        except ContextLengthExceeded:
            log.warning("context length exceeded in %s; compacting and retrying once", msg.key)
            try:
                await self.memory.compact_now(msg.key, force=True)
            except Exception:
                log.warning("forced compaction of %s failed", msg.key, exc_info=True)
            view = await self.memory.view(msg.key, budget // 2, through_seq=seq, recall=True)
            try:
                text = await self._generate(view, on_delta)
            except LLMError as e:
                return self._failure(msg, e)
        except LLMError as e:
            return self._failure(msg, e)
        if len(text) > MAX_REPLY_CHARS:
            log.warning("the model's answer in %s was %d characters; cut to %d",
                        msg.key, len(text), MAX_REPLY_CHARS)
            text = cut(text, MAX_REPLY_CHARS, "answer")
        bot_id, bot_name = self.identity(msg.key.platform)
        reply_id = f"reply:{msg.message_id}"
        try:
            await self.memory.record(
                NewTurn(msg.key, reply_id, "assistant", bot_id, bot_name, text, 0, time.time())
            )
        except StoreError as e:  # the answer is still worth giving; memory lacks only it
            log.error("could not record the reply to %s in %s: %s", msg.message_id, msg.key,
                      e, exc_info=e)
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
        note = ""
        if not digest.fresh:
            note = f"\n_({digest_failure(digest.error)}; this is the stored summary.)_"
        earlier = ""
        if digest.episodes:
            spans = episode_spans(list(reversed(digest.episodes)))
            earlier = f"\n\nEarlier: {spans} (UTC)"
        return CommandResult(
            f"{digest.text.strip()}{note}{earlier}\n\n— {footer(digest.stats)}"
        )

    async def remember(self, key: ChannelKey, text: str, *, author: str = "") -> CommandResult:
        """``/remember <text>``: pin a long-term fact (anyone may)."""
        text = text.strip()
        if not text:
            return CommandResult("Tell me what to remember: /remember <text>.", ok=False)
        if len(text) > MAX_FACT_CHARS:
            return CommandResult(
                f"That is too long to pin as a fact (at most {MAX_FACT_CHARS:,} characters).",
                ok=False,
            )
        fact = await self.memory.remember(key, text, author=author)
        return CommandResult(f"Remembered as fact #{fact.id}: {fact.text}")

    async def memory_list(self, key: ChannelKey) -> CommandResult:
        """``/memory``: the channel's long-term facts (the adapter shows it to the caller only)."""
        facts = await self.memory.facts(key, limit=MEMORY_LIST_LIMIT + 1)
        if not facts:
            return CommandResult(
                "I have no long-term facts for this channel yet. Pin one with /remember <text>."
            )
        lines = [_listed(f) for f in facts[:MEMORY_LIST_LIMIT]]
        more = (
            f"\n(only the newest {MEMORY_LIST_LIMIT} are shown)"
            if len(facts) > MEMORY_LIST_LIMIT
            else ""
        )
        return CommandResult(
            "Long-term facts of this channel (newest first; /forget <id> removes one):\n"
            + "\n".join(lines)
            + more
        )

    async def forget(
        self, key: ChannelKey, ref: str, *, allowed: bool, refusal: str | None = None
    ) -> CommandResult:
        """``/forget <fact id or text>``: remove one fact; same permission as ``/reset``."""
        if not allowed:
            return CommandResult(
                refusal or "You are not allowed to change this channel's memory.", ok=False
            )
        if not ref.strip():
            return CommandResult("Which fact? /forget <id or text> (see /memory).", ok=False)
        out = await self.memory.forget(key, ref)
        if out is None:
            return CommandResult(f"I have no fact matching {ref.strip()!r} here.", ok=False)
        if isinstance(out, list):
            ids = ", ".join(f"#{f.id}" for f in out[:10])
            return CommandResult(
                f"Several facts match ({ids}); say which one by id: /forget <id>.", ok=False
            )
        return CommandResult(f"Forgot fact #{out.id}: {out.text}")

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
        if not (
            result.turns
            or result.had_summary
            or result.facts
            or result.episodes
            or result.channel_facts
        ):
            return CommandResult("There was nothing to forget: I had no memory of this channel.")
        parts = [f"{result.turns} messages"]
        if result.had_summary:
            parts.append("the summary")
        if result.facts:
            parts.append(f"{result.facts} carried facts")
        if result.episodes:
            parts.append(f"{result.episodes} archived episodes")
        if result.channel_facts:
            parts.append(f"{result.channel_facts} long-term facts")
        return CommandResult(f"Done: I forgot {', '.join(parts)} from this channel.")

    async def edited(self, key: ChannelKey, message_id: str, text: str) -> None:
        """A platform edit: update the turn if it is not summarized yet."""
        outcome = await self.memory.edit(key, message_id, cut(text, self.config.max_input_chars))
        log.debug("edit of %s in %s: %s", message_id, key, outcome)

    async def deleted(self, key: ChannelKey, message_id: str) -> None:
        """A platform delete: remove the turn if it is not summarized yet."""
        outcome = await self.memory.delete(key, message_id)
        log.debug("delete of %s in %s: %s", message_id, key, outcome)
