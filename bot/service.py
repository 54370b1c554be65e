"""``ChatService``: what happens on a message (the memory commands ``/summary``, ``/reset``,
``/remember``, ``/memory`` and ``/forget`` are its ``MemoryCommands`` part; ``/catchup`` and
``/digest`` delegate to ``bot.catchup_command`` and ``bot.digests``; ``/config`` to
``bot.config_command``).

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
* Channel settings (``bot.channel_config``, ``/config``) pick persona, model, reply and
  record modes (``record off``: nothing stored); daily token quotas: ``bot.quota``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bot.catchup_command import Catchups, Where
from bot.channel_config import ChannelConfig, ChannelSettings, Defaults, answers
from bot.commands.digest import DigestRequest
from bot.config_command import Caller, ConfigRequest, run_config
from bot.digests import DigestScheduler
from bot.errors import ContextLengthExceeded, LLMError, OverQuota
from bot.llm import LLM
from bot.memory_commands import (
    MAX_FACT_CHARS,
    MemoryCommands,
    digest_failure,
    footer,
)
from bot.messages import CommandResult, IncomingMessage, Reply
from bot.observe import NullObserver, ServiceObserver, bind_request
from bot.outbox import Outbox
from bot.prompts import build_messages, fixed_overhead, settled_reply, strip_echoed_label
from bot.quota import Quota
from bot.rate_limit import RateLimiter
from bot.since import CatchupArgs
from memory.completion import ChatMessage
from memory.errors import StoreError, StoreUnavailableError
from memory.manager import MemoryManager
from memory.models import ChannelKey, MemoryView, NewTurn, Turn
from memory.speakers import human_name

if TYPE_CHECKING:
    from bot.owed import OwedReplies

__all__ = [
    "MAX_FACT_CHARS",
    "MAX_REPLY_CHARS",
    "RATE_LIMITED",
    "STORE_FAILED",
    "TOO_LONG",
    "ChatService",
    "ServiceConfig",
    "cut",
    "digest_failure",
    "footer",
]

log = logging.getLogger(__name__)
DeltaSink = Callable[[str], Awaitable[None]]

MAX_REPLY_CHARS = 40_000  # Slack cuts a message's text beyond this; no sane reply is longer
TOO_LONG = (
    "That message is too long for me ({length:,} characters; I read at most {limit:,}). "
    "I kept the first {limit:,} characters in memory; please ask again in a shorter message."
)
RATE_LIMITED = (
    "You're asking me faster than I can answer (at most {limit} replies a minute). I still "
    "remember what you write; please ask again in a minute."
)
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


class ChatService(MemoryCommands):
    """The application core; adapters call it, it calls memory and the LLM."""

    def __init__(self, memory: MemoryManager, llm: LLM, config: ServiceConfig, *,
                 clock: Callable[[], float] = time.monotonic,
                 owed: OwedReplies | None = None, channels: ChannelConfig | None = None,
                 quota: Quota | None = None) -> None:
        self.memory = memory
        self.llm = llm
        self.config = config
        self.clock = clock
        self.owed = owed  # replies owed to mentions, across crashes (bot.owed)
        self.channels = channels or ChannelConfig(None, Defaults(
            config.system_prompt, "", "", (), config.record_mode,
            frozenset(config.always_reply_channels)))
        self.quota = quota or Quota(None)
        self._decided: dict[tuple[ChannelKey, str], ChannelSettings] = {}
        self._identities: dict[str, tuple[str, str]] = {}
        # USER_RATE_LIMIT; reads self.clock when asked (tests replace the clock)
        self._rate = RateLimiter(config.user_rate_limit, lambda: self.clock())
        self.observer: ServiceObserver = NullObserver()  # the admin server's metrics
        # /catchup and /digest (bot/catchup_command.py, bot/digests.py); set by Runtime
        self.catchups: Catchups | None = None
        self.digests: DigestScheduler | None = None
        self.outbox: Outbox | None = None  # every outgoing post (bot.outbox); set by Runtime

    def set_identity(self, platform: str, bot_id: str, bot_name: str) -> None:
        """Record who the bot is on ``platform`` (after login), for its assistant turns.

        Per platform, because one process may run Discord and Slack at once.
        """
        self._identities[platform] = (bot_id, bot_name)
        self.observer.connected(platform)

    def identity(self, platform: str) -> tuple[str, str]:
        """(bot id, bot name) on ``platform``; the configured defaults until login."""
        return self._identities.get(platform, (self.config.bot_id, self.config.bot_name))

    def _bot_names(self, platform: str) -> tuple[str, str]:
        """Names a person may not be labelled with: the bot's here and the configured one."""
        return self.identity(platform)[1], self.config.bot_name

    def should_reply(self, msg: IncomingMessage) -> bool:
        """Mentioned, DM'd, replied to, or in a channel configured to always reply."""
        return (
            msg.mentions_bot
            or msg.is_direct
            or msg.reply_to_bot
            or msg.key.channel in self.config.always_reply_channels
        )

    async def will_reply(self, msg: IncomingMessage) -> bool:
        """Whether ``msg`` gets a reply (its channel's ``reply_mode``); ``on_message`` reuses
        the settings found, as waiting twice could let a later message overtake it."""
        settings = await self.channels.get(msg.key)
        if len(self._decided) > 10_000:
            self._decided.clear()
        self._decided[(msg.key, msg.message_id)] = settings
        return answers(msg, settings)

    def memory_budget(self, persona: str | None = None) -> int:
        """Tokens left for summary, facts and turns once the fixed parts are paid for."""
        fixed = fixed_overhead(persona or self.config.system_prompt, self.memory.tokenizer)
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
        # From will_reply, or cached: no suspension. Else ChannelConfig queues callers per
        # channel in order, so messages reach record() in arrival order.
        settings = (self._decided.pop((msg.key, msg.message_id), None)
                    or self.channels.peek(msg.key) or await self.channels.get(msg.key))
        addressed = answers(msg, settings)
        if settings.record == "off":  # privacy: nothing of this channel is stored
            if on_recorded is not None:
                on_recorded()  # nothing to keep
            return await self._answer(msg, None, on_delta, settings) if addressed else None
        if settings.record == "addressed" and not addressed:
            if on_recorded is not None:
                on_recorded()  # nothing to keep
            return None
        limit = self.config.max_input_chars
        bind_request(msg.key, msg.message_id)
        due = self.owed.due(msg) if addressed and self.owed is not None else None
        # No other await before record(): messages must be queued in arrival order.
        try:
            result = await self.memory.record(
                NewTurn(
                    msg.key,
                    msg.message_id,
                    "user",
                    msg.author_id,
                    human_name(msg.author_name, self._bot_names(msg.key.platform)),
                    cut(msg.text, limit),
                    0,
                    msg.sent_at,
                    due,
                )
            )
        except StoreError as e:
            self.observer.store_error(type(e).__name__)
            if isinstance(e, StoreUnavailableError):  # the store reports it, once a minute
                log.debug("could not record message %s in %s: %s", msg.message_id, msg.key, e)
            else:
                log.error("could not record message %s in %s: %s", msg.message_id, msg.key, e,
                          exc_info=e)
            return Reply(STORE_FAILED, failed=True) if addressed else None
        if on_recorded is not None:
            on_recorded()
        if result.created:
            self.observer.recorded(msg.key, "user")
        owed = self.owed  # a re-delivery is answered only while its reply is still owed
        if not addressed or not (result.created or (owed and await owed.redelivered(msg))):
            return None  # not for us, or a re-delivery we answered (or are answering)
        if due is not None and owed is not None and result.created:
            owed.answering(msg.key, msg.message_id)
        if limit and len(msg.text) > limit:
            log.info("message %s in %s is %d characters (limit %d): stored cut, not answered",
                     msg.message_id, msg.key, len(msg.text), limit)
            return Reply(TOO_LONG.format(length=len(msg.text), limit=limit), failed=True)
        if not self._rate.allow(msg.key.platform, msg.author_id):
            if not self._rate.first_telling(msg.key.platform, msg.author_id):
                await self.delivered(msg, True)  # told this minute; quiet, nothing owed
                return None
            log.info("user %s on %s is over %d replies a minute", msg.author_id,
                     msg.key.platform, self.config.user_rate_limit)
            return Reply(RATE_LIMITED.format(limit=self.config.user_rate_limit), failed=True)
        return await self.answer(msg, result.turn.seq, on_delta, settings)

    async def delivered(self, msg: IncomingMessage, ok: bool) -> None:
        """The adapter's report on a reply: delivered (or nothing was to be sent), or not
        (failed, or cut short by shutdown), so it is answered again later (``bot.owed``)."""
        if self.owed is not None:
            await self.owed.finished(msg.key, msg.message_id, delivered=ok)

    async def answer(self, msg: IncomingMessage, seq: int, on_delta: DeltaSink | None = None,
                     settings: ChannelSettings | None = None) -> Reply | None:
        """The reply to ``msg``, recorded as turn ``seq``, within the channel's settings and
        quotas; store failures become a sentence. None: over quota (told privately)."""
        try:
            reply = await self._answer(msg, seq, on_delta,
                                       settings or await self.channels.get(msg.key))
        except StoreError as e:
            self.observer.store_error(type(e).__name__)
            log.error("reply to %s in %s failed on the store: %s", msg.message_id, msg.key, e,
                      exc_info=e)
            return Reply(STORE_FAILED, failed=True)
        if reply is None:
            await self.delivered(msg, True)  # refused by a quota, told privately: none owed
        return reply

    async def backfilled(self, msg: IncomingMessage) -> bool:
        """Remember a message missed while the bot was away (backfill); never answer it
        here. An addressed one younger than ``ANSWER_MISSED_SECONDS`` is recorded with an
        unclaimed debt, which the missed-mention sweep answers once (issue 14, item 3).

        The same rules as a live message decide whether it is stored (the channel's
        ``record`` and ``reply_mode``, ``MAX_INPUT_CHARS``), and the same message id makes
        it the same turn, so a live delivery and a backfill of one message store it once.
        True when it was new.
        """
        settings = await self.channels.get(msg.key)
        addressed = answers(msg, settings)
        if settings.record == "off" or (settings.record == "addressed" and not addressed):
            return False
        due = None
        if addressed and self.owed is not None and self.owed.young(msg.sent_at):
            # A mention posted while the bot was down is owed a reply like one a crash left
            # unanswered: recorded unclaimed, so the sweep (``bot.owed``) answers it once.
            due = self.owed.due(msg)
            due = replace(due, owner="") if due is not None else None
        name = human_name(msg.author_name, self._bot_names(msg.key.platform))
        turn = NewTurn(msg.key, msg.message_id, "user", msg.author_id, name,
                       cut(msg.text, self.config.max_input_chars), 0, msg.sent_at, due)
        return (await self.memory.record(turn)).created

    async def _answer(self, msg: IncomingMessage, seq: int | None, on_delta: DeltaSink | None,
                      settings: ChannelSettings) -> Reply | None:
        """``_reply`` with its model calls metered on the person's (and server's) daily
        quotas (``bot.quota``); refused: the private notice, once a day."""
        with self.quota.paying(msg.key, "reply", msg.author_id, direct=msg.is_direct,
                               settings=settings):
            try:
                return await self._reply(msg, seq, on_delta, settings)
            except OverQuota as e:
                return await self.quota.refused(e, msg.key, msg.author_id)

    async def _reply(self, msg: IncomingMessage, seq: int | None, on_delta: DeltaSink | None,
                     settings: ChannelSettings) -> Reply:
        """The model's answer; ``seq`` None: the message is not stored (``record off``), so
        the answer sees that message alone and is not stored either."""
        started = time.monotonic()
        persona, model = settings.persona, settings.chosen("model")
        budget, floor = self.memory_budget(persona), self.memory_budget() // 2
        if budget < floor:  # a channel's long persona may not crowd out the conversation
            tok = self.memory.tokenizer
            persona = tok.truncate(persona, max(0, tok.count(persona) - (floor - budget)))
            budget = floor
        if seq is None:
            lone = Turn(msg.key, 0, msg.message_id, "user", msg.author_id, msg.author_name,
                        cut(msg.text, self.config.max_input_chars), 0, msg.sent_at)
            view = MemoryView(msg.key, "", 0, (), 0, (lone,), 0)
        else:
            view = await self.memory.view(msg.key, budget, through_seq=seq, recall=True)
        self.observer.recalled(msg.key, time.monotonic() - started)
        try:
            text = await self._generate(view, on_delta, persona, model)
        except ContextLengthExceeded:
            if seq is None:
                return Reply(TOO_LONG.format(length=len(msg.text), limit=len(msg.text) // 2),
                             failed=True)
            log.warning("context length exceeded in %s; compacting and retrying once", msg.key)
            try:
                await self.memory.compact_now(msg.key, force=True)
            except Exception:
                log.warning("forced compaction of %s failed", msg.key, exc_info=True)
            view = await self.memory.view(msg.key, budget // 2, through_seq=seq, recall=True)
            try:
                text = await self._generate(view, on_delta, persona, model)
            except LLMError as e:
                self.observer.replied(msg.key, time.monotonic() - started, view.tokens,
                                      seq or 0, True)
                return self._failure(msg, e)
        except LLMError as e:
            self.observer.replied(msg.key, time.monotonic() - started, view.tokens, seq or 0, True)
            return self._failure(msg, e)
        self.observer.replied(msg.key, time.monotonic() - started, view.tokens, seq or 0, False)
        if len(text) > MAX_REPLY_CHARS:
            log.warning("the model's answer in %s was %d characters; cut to %d",
                        msg.key, len(text), MAX_REPLY_CHARS)
            text = cut(text, MAX_REPLY_CHARS, "answer")
        bot_id, bot_name = self.identity(msg.key.platform)
        reply_id = f"reply:{msg.message_id}"
        if seq is None:
            return Reply(text)
        try:  # answered before a crash: the stored text is repeated
            text = (await self.memory.record(NewTurn(
                msg.key, reply_id, "assistant", bot_id, bot_name, text, 0, time.time()))).turn.text
            self.observer.recorded(msg.key, "assistant")
        except StoreError as e:  # the answer is still worth giving; memory lacks only it
            self.observer.store_error(type(e).__name__)
            log.error("could not record the reply to %s in %s: %s", msg.message_id, msg.key,
                      e, exc_info=e)
        return Reply(text)

    async def _generate(self, view: MemoryView, on_delta: DeltaSink | None, persona: str,
                        model: str | None) -> str:
        messages: list[ChatMessage] = build_messages(persona, view)
        extra = {"model": model} if model else {}  # only when the channel chose one
        if on_delta is None:
            completion = await self.llm.complete(
                messages, max_tokens=self.config.reply_tokens, purpose="reply", **extra
            )
            return strip_echoed_label(completion.text) or completion.text
        parts: list[str] = []
        async for delta in self.llm.stream(
            messages, max_tokens=self.config.reply_tokens, purpose="reply", **extra
        ):
            parts.append(delta)
            shown = settled_reply("".join(parts))
            if shown:  # None while the start may still be an echoed "[Name]: " label
                await on_delta(shown)
        text = strip_echoed_label("".join(parts)).strip()
        if not text:
            raise LLMError("empty streamed reply")
        return text

    @staticmethod
    def _failure(msg: IncomingMessage, error: LLMError) -> Reply:
        log.error("reply in %s failed: %s", msg.key, error, exc_info=error)
        return Reply(error.user_message, failed=True)

    async def configure(self, key: ChannelKey, request: ConfigRequest, caller: Caller
                        ) -> CommandResult:
        """``/config``: see ``bot.config_command`` (answered to the caller only)."""
        return await run_config(key, request, caller, self.channels, self.quota)

    async def summary(self, key: ChannelKey, author_id: str = "") -> CommandResult:
        """``/summary`` (``MemoryCommands.summary``), paid by the caller and their server."""
        with self.quota.paying(key, "summary", author_id):
            try:
                return await super().summary(key)
            except OverQuota as e:
                return CommandResult(e.user_message, ok=False)  # private, like a reply's

    async def catchup(self, where: Where, author_id: str,
                      text: str | CatchupArgs = "", *, public: bool = False) -> CommandResult:
        """``/catchup [since] [zone] [public]``: what happened since (``bot.catchup_command``;
        the text, or its arguments as ``bot.commands.catchup`` read them), paid by the caller
        and their server; ``public``: the answer is posted for everyone here."""
        if self.catchups is None:
            return CommandResult("Catch-up is not available here.", ok=False)
        with self.quota.paying(where.key, "catchup", author_id):
            try:
                return await self.catchups.command(where, author_id, text, public=public)
            except OverQuota as e:
                return CommandResult(e.user_message, ok=False)

    async def digest(self, where: Where, text: str | DigestRequest, *, allowed: bool,
                     by: str = "", refusal: str = "") -> CommandResult:
        """``/digest daily|weekly|off|now``: scheduled digests (``bot.digests``; the text, or
        the request ``bot.commands.digest`` read); ``now`` is paid by the server, like a
        scheduled one."""
        if self.digests is None:
            return CommandResult("Digests are not available here.", ok=False)
        with self.quota.paying(where.key, "digest"):
            try:
                return await self.digests.command(where, text, allowed=allowed, by=by,
                                                  refusal=refusal)
            except OverQuota as e:
                return CommandResult(e.user_message, ok=False)

    async def edited(self, key: ChannelKey, message_id: str, text: str) -> None:
        """A platform edit: update the turn if it is not summarized yet."""
        outcome = await self.memory.edit(key, message_id, cut(text, self.config.max_input_chars))
        log.debug("edit of %s in %s: %s", message_id, key, outcome)

    async def deleted(self, key: ChannelKey, message_id: str) -> None:
        """A platform delete: remove the turn if it is not summarized yet."""
        outcome = await self.memory.delete(key, message_id)
        log.debug("delete of %s in %s: %s", message_id, key, outcome)
