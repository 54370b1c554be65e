"""``ChatService``: what happens on a message. The commands are features it holds for the
adapters (``bot.memory_commands.feature``, ``bot.catchup.wiring``, ``bot.channels.config_command``);
delivering a reply is ``bot.conversation.reply_flow``'s.

An adapter hands each message over once (``receive``) and gets back a ``Received`` (an
``Outcome`` and, when a reply is owed, the ``PendingReply``). The message is recorded first,
so it is never lost whatever the model does; the reply is built from a committed view read
through that message's seq and recorded as ``reply:<trigger id>``, so a re-delivered event
is neither recorded nor answered twice. Compaction runs in the background and never delays
a reply, except once, on purpose, when the model says the prompt was too long.

Each limit has one outcome (SECURITY.md): an over-long message is stored cut with a marker
and answered with a request for something shorter; a person over ``user_rate_limit`` a
minute is told once and then only recorded; a store failure is logged once and the person
told briefly; an over-long model answer is cut with a marker. Channel settings
(``bot.channels.config``) pick persona, model and modes; quotas are ``bot.channels.quota``'s.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bot.access import AccessRules, Verdict
from bot.attachments.intake import AttachmentIntake
from bot.attachments.refusal import mark_refused
from bot.attachments.vision import ImagePart, with_images
from bot.catchup.wiring import CatchupCommands
from bot.channels.config import ChannelConfig, ChannelSettings, Defaults, answers
from bot.channels.config_command import ConfigCommand
from bot.channels.quota import Quota
from bot.conversation.budget import Budget
from bot.conversation.chain import CHAIN_SHARE, Chain, fit_chain, read_chain
from bot.conversation.hooks import NO_HOOKS, FeatureSet
from bot.conversation.outbox import Outbox
from bot.conversation.prompts import (
    build_messages,
    settled_reply,
    speaker_names,
    strip_echoed_label,
)
from bot.conversation.rate_limit import RateLimiter
from bot.conversation.viewing import viewed_memory, with_refusal
from bot.errors import ContextLengthExceeded, LLMError, LLMInputRejected, OverQuota
from bot.llm.client import LLM
from bot.memory_commands.feature import MemoryCommands
from bot.messages import (
    DeltaSink,
    IncomingMessage,
    Outcome,
    PendingReply,
    Received,
    Refresh,
    Reply,
)
from bot.ops.observe import NullObserver, ServiceObserver, bind_request
from bot.settings.sections import ChatSettings
from bot.stores.owed import OwedReply
from memory.completion import ChatMessage
from memory.errors import AnsweredTurnGone, StoreError, StoreUnavailableError
from memory.manager import MemoryManager
from memory.models import ChannelKey, MemoryView, NewTurn, Turn, TurnRef
from memory.speakers import human_name

if TYPE_CHECKING:
    from bot.missed.owed import OwedReplies

__all__ = [
    "MAX_REPLY_CHARS",
    "RATE_LIMITED",
    "STORE_FAILED",
    "TOO_LONG",
    "ChatService",
    "cut",
]

log = logging.getLogger(__name__)
Compose = Callable[[DeltaSink | None], Awaitable[Reply | None]]

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


def _model_name(llm: LLM) -> str:
    """The model ``llm`` replies with, unless a channel chose another."""
    return str(getattr(llm, "model", "") or llm.name.partition(":")[2])


def cut(text: str, limit: int, what: str = "message") -> str:
    """``text`` cut to ``limit`` characters plus a marker saying how many were not kept."""
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[…{what} cut: {len(text) - limit:,} more characters not kept]"


class ChatService:
    """The application core: adapters hand it messages (``receive``), it calls memory and
    the LLM. The commands are features it holds for the adapters: ``memory_commands``,
    ``catchup_commands`` and ``config_command``."""

    def __init__(self, memory: MemoryManager, llm: LLM, config: ChatSettings,
                 budget: Budget, *, clock: Callable[[], float] = time.monotonic,
                 owed: OwedReplies | None = None, channels: ChannelConfig | None = None,
                 quota: Quota | None = None, outbox: Outbox | None = None,
                 catchup: CatchupCommands | None = None,
                 access: AccessRules | None = None, features: FeatureSet = NO_HOOKS) -> None:
        self.memory = memory
        self.llm = llm
        self.config = config
        self.budget = budget
        self.clock = clock
        self.owed = owed  # replies owed to mentions, across crashes (bot.missed.owed)
        self.channels = channels or ChannelConfig(None, Defaults(
            config.system_prompt, "", "", (), config.record_mode,
            frozenset(config.always_reply_channels)))
        self.quota = quota or Quota(None)
        self.outbox = outbox or Outbox(None)  # every outgoing post (bot.conversation.outbox)
        self.memory_commands = MemoryCommands(memory, self.channels, self.quota)
        self.catchup_commands = catchup or CatchupCommands(self.quota)
        self.config_command = ConfigCommand(self.channels, self.quota)
        self.access = access or AccessRules()  # who may talk to the bot (bot.access)
        self.features = features  # the features' hooks and objects (bot.features)
        self._identities: dict[str, tuple[str, str]] = {}
        # USER_RATE_LIMIT; reads self.clock when asked (tests replace the clock)
        self._rate = RateLimiter(config.user_rate_limit, lambda: self.clock())
        self.observer: ServiceObserver = NullObserver()  # the admin server's metrics
        # files people attach, read into their turns (bot.attachments); Runtime sets limits
        self.attachments = AttachmentIntake(memory)

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

    def _memory_budget(self, persona: str | None = None) -> int:
        """Tokens left for summary, facts and turns once the fixed parts are paid for."""
        return self.budget.memory_with(persona or self.config.system_prompt,
                                       self.memory.tokenizer)

    async def receive(self, msg: IncomingMessage) -> Received:
        """Record ``msg`` (per the channel's ``record`` and ``reply_mode``) and say what
        became of it; when a reply is owed, ``Received.reply`` makes it
        (``bot.conversation.reply_flow`` delivers it). Once this returns, the message is durable or
        needs no storing."""
        # Cached and nobody waiting: no suspension. Else ChannelConfig queues callers per
        # channel in order, so messages reach record() in arrival order.
        settings = await self.channels.get(msg.key)
        admitted = self._admitted(msg, settings)
        if admitted is None:  # a channel the bot stays out of, or a person not recorded
            return Received(Outcome.NOT_RECORDED)
        addressed = admitted and answers(msg, settings)
        if settings.record == "off":  # privacy: nothing of this channel is stored
            return Received(Outcome.NOT_RECORDED, self._pending(
                msg, Outcome.NOT_RECORDED, self._composer(msg, None, settings))
                if addressed else None)
        if settings.record == "addressed" and not addressed:
            return Received(Outcome.NOT_RECORDED)
        limit = self.config.max_input_chars
        bind_request(msg.key, msg.message_id)
        due = self.owed.due(msg) if addressed and self.owed is not None else None
        # No other await before record(): messages must be queued in arrival order.
        try:
            result = await self.memory.record(NewTurn(
                msg.key, msg.message_id, "user", msg.author_id,
                human_name(msg.author_name, self._bot_names(msg.key.platform)),
                cut(msg.text, limit), 0, msg.sent_at, due))
        except StoreError as e:
            self.observer.store_error(type(e).__name__)
            if isinstance(e, StoreUnavailableError):  # the store reports it, once a minute
                log.debug("could not record message %s in %s: %s", msg.message_id, msg.key, e)
            else:
                log.error("could not record message %s in %s: %s", msg.message_id, msg.key, e,
                          exc_info=e)
            return Received(Outcome.STORE_FAILED, self._notice(
                msg, Outcome.STORE_FAILED, STORE_FAILED) if addressed else None)
        self.attachments.start(msg, cut(msg.text, limit))  # files: read, then edit the turn
        if result.created:
            self.observer.recorded(msg.key, "user")
        owed = self.owed  # a re-delivery is answered only while its reply is still owed
        if not addressed or not (result.created or (owed and await owed.redelivered(msg))):
            # not for us, or a re-delivery we answered (or are answering)
            return Received(Outcome.RECORDED if result.created else Outcome.REDELIVERED)
        if due is not None and owed is not None and result.created:
            owed.answering(msg.key, msg.message_id)
        if limit and len(msg.text) > limit:
            log.info("message %s in %s is %d characters (limit %d): stored cut, not answered",
                     msg.message_id, msg.key, len(msg.text), limit)
            return Received(Outcome.TOO_LONG, self._notice(
                msg, Outcome.TOO_LONG, TOO_LONG.format(length=len(msg.text), limit=limit)))
        if not self._rate.allow(msg.key.platform, msg.author_id):
            if not self._rate.first_telling(msg.key.platform, msg.author_id):
                await self._settle(msg, True)  # told this minute; quiet, nothing owed
                return Received(Outcome.RATE_LIMITED)
            log.info("user %s on %s is over %d replies a minute", msg.author_id,
                     msg.key.platform, self.config.user_rate_limit)
            return Received(Outcome.RATE_LIMITED, self._notice(
                msg, Outcome.RATE_LIMITED,
                RATE_LIMITED.format(limit=self.config.user_rate_limit)))
        return Received(Outcome.RECORDED, self._pending(
            msg, Outcome.RECORDED, self._composer(msg, result.turn.seq, settings)))

    def _admitted(self, msg: IncomingMessage, settings: ChannelSettings) -> bool | None:
        """The access lists on ``msg`` (``bot.access``; the server's own in ``settings``):
        True, may be answered; False, may be stored but never answered (a blocked person);
        None, neither."""
        verdict = self.access.verdict(msg.key, msg.author_id, msg.roles, direct=msg.is_direct,
                                      parent=msg.parent, server=settings.access)
        if verdict is Verdict.ADMITTED:
            return True
        log.debug("message %s in %s by %s: %s not admitted", msg.message_id, msg.key,
                  msg.author_id, verdict.value)
        return False if self.access.records(verdict) else None

    async def on_message(self, msg: IncomingMessage, *,
                         on_delta: DeltaSink | None = None) -> Reply | None:
        """``receive``, then the reply as text, taken as delivered (nothing is posted):
        for callers that want the answer itself (benchmarks, tests, scripts)."""
        pending = (await self.receive(msg)).reply
        if pending is None:
            return None
        try:
            return await pending.compose(on_delta)
        finally:
            await pending.settle(True)

    async def answer(self, owed: OwedReply, refresh: Refresh | None = None
                     ) -> PendingReply | None:
        """The late reply to a recorded message whose reply was never delivered (the
        missed-mention sweep, ``bot.missed.sweep``); None when the message is gone (deleted,
        ``/reset``) or the access lists refuse it now (the person or the channel was
        blocked since, DMs turned off): ``refresh`` (the adapter's) says who and where the
        author is now."""
        found = await self.memory.store.turns_at(owed.key, [owed.seq])
        if not found or found[0].message_id != owed.message_id:
            return None
        t = found[0]
        msg = IncomingMessage(t.key, t.message_id, t.author_id, t.author_name, t.text,
                              t.sent_at, mentions_bot=True, route=owed.route)
        if refresh is not None:
            msg = await refresh(msg)
        if not self._admitted(msg, await self.channels.get(msg.key)):
            log.info("not answering message %s in %s late: the access lists refuse it now",
                     msg.message_id, msg.key)
            return None
        return replace(self._pending(msg, Outcome.RECORDED, self._composer(msg, t.seq, None)),
                       placeholder=owed.placeholder, late=True)

    def _composer(self, msg: IncomingMessage, seq: int | None,
                  settings: ChannelSettings | None) -> Compose:
        """The model's answer to ``msg`` (turn ``seq``; None: not stored), within the
        channel's settings and quotas; store failures become a sentence."""

        async def compose(on_delta: DeltaSink | None) -> Reply | None:
            chosen = settings or await self.channels.get(msg.key)
            try:  # the model calls are metered on the person's and server's daily quotas
                with self.quota.paying(msg.key, "reply", msg.author_id, direct=msg.is_direct,
                                       settings=chosen):
                    try:
                        return await self._reply(msg, seq, on_delta, chosen)
                    except OverQuota as e:  # refused: the private notice, once a day
                        return await self.quota.refused(e, msg.key, msg.author_id)
            except StoreError as e:
                self.observer.store_error(type(e).__name__)
                log.error("reply to %s in %s failed on the store: %s", msg.message_id,
                          msg.key, e, exc_info=e)
                return Reply(STORE_FAILED, failed=True)

        return compose

    def _notice(self, msg: IncomingMessage, outcome: Outcome, text: str) -> PendingReply:
        """A reply that is a ready-made sentence (a failure, a limit)."""

        async def compose(on_delta: DeltaSink | None) -> Reply:
            return Reply(text, failed=True)

        return self._pending(msg, outcome, compose)

    def _pending(self, msg: IncomingMessage, outcome: Outcome, compose: Compose
                 ) -> PendingReply:
        owed = self.owed

        async def show(placeholder: str) -> None:
            if owed is not None and owed.is_answering(msg.key, msg.message_id):
                await owed.showing(msg.key, msg.message_id, placeholder)

        return PendingReply(msg, outcome, compose, show, lambda ok: self._settle(msg, ok),
                            owed=owed is not None and owed.is_answering(msg.key, msg.message_id))

    async def _settle(self, msg: IncomingMessage, ok: bool) -> None:
        """A reply delivered (or nothing was to be sent), or not (failed, or cut short by
        shutdown): then it is answered again later (``bot.missed.owed``)."""
        if self.owed is not None:
            await self.owed.finished(msg.key, msg.message_id, delivered=ok)

    async def backfilled(self, msg: IncomingMessage) -> bool:
        """Remember a message missed while the bot was away (backfill); never answer it
        here. An addressed one younger than ``ANSWER_MISSED_SECONDS`` is recorded with an
        unclaimed debt, which the missed-mention sweep answers once.

        The same rules as a live message decide whether it is stored (the channel's
        ``record`` and ``reply_mode``, ``MAX_INPUT_CHARS``), and the same message id makes
        it the same turn, so a live delivery and a backfill of one message store it once.
        True when it was new.
        """
        settings = await self.channels.get(msg.key)
        admitted = self._admitted(msg, settings)
        if admitted is None:
            return False
        addressed = admitted and answers(msg, settings)
        if settings.record == "off" or (settings.record == "addressed" and not addressed):
            return False
        due = None
        if addressed and self.owed is not None and self.owed.young(msg.sent_at):
            # A mention posted while the bot was down is owed a reply like one a crash left
            # unanswered: recorded unclaimed, so the sweep (``bot.missed.sweep``) answers it once.
            due = self.owed.due(msg)
            due = replace(due, owner="") if due is not None else None
        name = human_name(msg.author_name, self._bot_names(msg.key.platform))
        turn = NewTurn(msg.key, msg.message_id, "user", msg.author_id, name,
                       cut(msg.text, self.config.max_input_chars), 0, msg.sent_at, due)
        created = (await self.memory.record(turn)).created
        self.attachments.start(msg, turn.text)  # files: read, then edit the turn
        return created

    async def _reply(self, msg: IncomingMessage, seq: int | None, on_delta: DeltaSink | None,
                     settings: ChannelSettings) -> Reply:
        """The model's answer; ``seq`` None: the message is not stored (``record off``), so
        the answer sees that message alone and is not stored either. An author who may not
        read the channel's history (``reads_history``) gets an answer from their message
        alone too: the channel's memory, its reply chain included, is that history."""
        alone = seq is None or not msg.reads_history
        started = time.monotonic()
        persona, model = settings.persona, settings.chosen("model")
        params = settings.chosen("params")
        budget, floor = self._memory_budget(persona), self._memory_budget() // 2
        if budget < floor:  # a channel's long persona may not crowd out the conversation
            tok = self.memory.tokenizer
            persona = tok.truncate(persona, max(0, tok.count(persona) - (floor - budget)))
            budget = floor
        # attachments: the files read, this message's and those of the messages the
        # prompt shows (waiting until one deadline), and the images a vision model gets,
        # paid for out of the memory budget
        stored = cut(msg.text, self.config.max_input_chars)
        until = self.attachments.deadline()
        files = await self.attachments.settle(msg, stored, store=seq is not None, until=until)
        seer = "" if self.llm.is_offline else model or _model_name(self.llm)
        images = self.attachments.images_for(files, seer, budget // 2)
        budget -= sum(p.tokens for p in images) + self.attachments.note_tokens(msg.key)
        chain = Chain() if alone else await self._chain(msg, budget)  # paid before the view
        budget -= chain.tokens
        own = await self.features.prompt_lines(msg, budget // 4)  # the author's own notes
        budget -= self.memory.tokenizer.count("\n".join(own)) if own else 0
        viewed, cost = ((None, 0) if not msg.reads_history  # the channel in view
                        else await viewed_memory(self.memory, msg, budget))
        budget -= cost
        if alone:
            lone = Turn(msg.key, 0, msg.message_id, "user", msg.author_id, msg.author_name,
                        files.text if files else stored, 0, msg.sent_at)
            view = MemoryView(msg.key, "", 0, (), 0, (lone,), 0)
        else:
            view = await self.memory.view(msg.key, budget, through_seq=seq, recall=True)
            if await self.attachments.wait_for(view, until):  # earlier messages' files
                view = await self.memory.view(msg.key, budget, through_seq=seq, recall=True)
        view = self.attachments.mark_unread(view)  # files still on their way say so
        chain = chain.without(view)
        view = chain.unrecalled(view)
        self.observer.recalled(msg.key, time.monotonic() - started)
        shown = {len(view.turns): images} | self.attachments.earlier_images(  # attachments
            view.turns, seer, budget - view.tokens)
        try:
            try:
                text = await self._generate(view, on_delta, persona, model, shown, params,
                                            chain.turns, viewed, own)
            except LLMInputRejected:
                if not any(shown.values()):
                    raise
                bare = self._without_parts(view, shown)
                text = await self._generate(bare, on_delta, persona, model, params=params,
                                            chain=chain.turns, viewed=viewed, own=own)
                # accepted without them: the images were what it refused (a 400 about
                # something else fails the retry too, and leaves them as they are)
                view = await self._refused(view, shown, stored=seq is not None)
        except ContextLengthExceeded:
            if alone:
                return Reply(TOO_LONG.format(length=len(msg.text), limit=len(msg.text) // 2),
                             failed=True)
            log.warning("context length exceeded in %s; compacting and retrying once", msg.key)
            try:
                await self.memory.compact_now(msg.key, force=True)
            except Exception:
                log.warning("forced compaction of %s failed", msg.key, exc_info=True)
            view = self.attachments.mark_unread(
                await self.memory.view(msg.key, budget // 2, through_seq=seq, recall=True))
            chain = chain.without(view)
            view = chain.unrecalled(view)
            try:
                text = await self._generate(view, on_delta, persona, model, params=params,
                                            chain=chain.turns, viewed=viewed, own=own)
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
            return Reply(with_refusal(msg, text))
        try:  # answered before a crash: the stored text is repeated
            text = (await self.memory.record(NewTurn(
                msg.key, reply_id, "assistant", bot_id, bot_name, text, 0, time.time(),
                answers=TurnRef(seq, msg.message_id)))).turn.text
            self.observer.recorded(msg.key, "assistant")
        except AnsweredTurnGone:  # the answer, made from what was forgotten, is not kept
            log.info("message %s in %s was forgotten while it was answered; the answer is "
                     "not stored", msg.message_id, msg.key)
        except StoreError as e:  # the answer is still worth giving; memory lacks only it
            self.observer.store_error(type(e).__name__)
            log.error("could not record the reply to %s in %s: %s", msg.message_id, msg.key,
                      e, exc_info=e)
        return Reply(with_refusal(msg, text))

    async def _chain(self, msg: IncomingMessage, budget: int) -> Chain:
        """The reply chain ``msg`` belongs to, fitted into its share of ``budget``; none
        when it cannot be read (the reply is worth more than the chain)."""
        if msg.chain is None:
            return Chain()
        try:
            turns = await read_chain(self.memory.store, msg)
        except Exception:
            log.warning("could not read the reply chain of %s in %s; answering without it",
                        msg.message_id, msg.key, exc_info=True)
            return Chain()
        return fit_chain(turns, int(budget * CHAIN_SHARE), self.memory.tokenizer)

    @staticmethod
    def _without_parts(view: MemoryView, shown: Mapping[int, Sequence[ImagePart]]
                       ) -> MemoryView:
        """``view`` for a retry after the endpoint refused a request with the images
        ``shown`` (by request message index): each of them marked refused in its turn's
        text, so the retry goes without them and the model reads that they could not be
        read. Nothing is stored: whether the images were at fault, the retry tells."""
        turns = list(view.turns)
        for at, parts in shown.items():
            if parts and 0 < at <= len(turns):
                turn = turns[at - 1]
                turns[at - 1] = replace(turn, text=mark_refused(
                    turn.text, [p.line for p in parts if p.line]))
        return replace(view, turns=tuple(turns))

    async def _refused(self, view: MemoryView, shown: Mapping[int, Sequence[ImagePart]],
                       *, stored: bool) -> MemoryView:
        """The endpoint took the request without the images ``shown`` that it refused with
        them: each is marked refused in its turn (and in storage, when ``stored``), so no
        later request sends it again; ``view`` so marked."""
        turns = list(view.turns)
        for at, parts in shown.items():
            if not parts or not 0 < at <= len(turns):
                continue
            turn = turns[at - 1]
            text = await self.attachments.refused(turn.key, turn.message_id, turn.text, parts,
                                                  store=stored)
            turns[at - 1] = replace(turn, text=text)
        log.warning("the model endpoint refused a request with %d image(s) in %s; answered "
                    "without them, and they are not sent again", sum(map(len, shown.values())),
                    view.key)
        return replace(view, turns=tuple(turns))

    async def _generate(self, view: MemoryView, on_delta: DeltaSink | None, persona: str,
                        model: str | None,
                        images: Mapping[int, Sequence[ImagePart]] | None = None,
                        params: str | None = None, chain: Sequence[Turn] = (),
                        viewed: MemoryView | None = None, own: Sequence[str] = ()) -> str:
        messages: list[ChatMessage] = with_images(
            build_messages(persona, view, chain, viewed, own), images or {})
        extra: dict[str, Any] = {"model": model} if model else {}  # only when a channel chose
        if params:  # a channel's request fields, over MODEL_PARAMS
            extra["params"] = json.loads(params)
        names = speaker_names(view)
        if on_delta is None:
            completion = await self.llm.complete(
                messages, max_tokens=self.budget.reply_tokens, purpose="reply", **extra
            )
            return strip_echoed_label(completion.text, names) or completion.text
        parts: list[str] = []
        async for delta in self.llm.stream(
            messages, max_tokens=self.budget.reply_tokens, purpose="reply", **extra
        ):
            parts.append(delta)
            shown = settled_reply("".join(parts), names)
            if shown:  # None while the start may still be an echoed "[Name]: " label
                await on_delta(shown)
        text = strip_echoed_label("".join(parts), names).strip()
        if not text:
            raise LLMError("empty streamed reply")
        return text

    @staticmethod
    def _failure(msg: IncomingMessage, error: LLMError) -> Reply:
        log.error("reply in %s failed: %s", msg.key, error, exc_info=error)
        return Reply(error.user_message, failed=True)

    async def edited(self, key: ChannelKey, message_id: str, text: str) -> None:
        """A platform edit: update the turn if it is not summarized yet."""
        text = self.attachments.reapply(key, message_id, cut(text, self.config.max_input_chars))
        outcome = await self.memory.edit(key, message_id, text)
        log.debug("edit of %s in %s: %s", message_id, key, outcome)

    async def deleted(self, key: ChannelKey, message_id: str) -> None:
        """A platform delete: remove the turn if it is not summarized yet."""
        outcome = await self.memory.delete(key, message_id)
        log.debug("delete of %s in %s: %s", message_id, key, outcome)
