"""``ReplyJob``: the reply owed to one message, its steps as named methods.

``ChatService.receive`` creates the job when a reply is owed and hands it out in the
``PendingReply``; ``bot.conversation.reply_flow.ReplyFlow`` runs it: ``placed`` (the message
shown meanwhile is remembered on the debt), ``make`` (the reply), ``settled`` (delivered or
not). ``make`` is a ready-made notice, or the model's answer in these steps:

1. ``gather``: persona and budget, the files read, the reply chain, the viewed channel and
   the memory view through the message's seq;
2. ``prompt`` and ``generate``: the request, sent once; again without the images if the
   endpoint refused them, or after a forced compaction if the prompt was too long;
3. ``keep``: the answer cut to ``MAX_REPLY_CHARS`` and recorded as ``reply:<trigger id>``.

The job holds what it works with (``ReplyParts``), so its steps are plain methods a reader
(or a call-graph tool) follows by name.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from bot.attachments.intake import AttachmentIntake, Settled
from bot.attachments.refusal import mark_refused
from bot.attachments.vision import ImagePart, with_images
from bot.channels.config import ChannelConfig, ChannelSettings
from bot.channels.quota import Quota
from bot.conversation.budget import Budget
from bot.conversation.chain import CHAIN_SHARE, Chain, fit_chain, read_chain
from bot.conversation.hooks import NO_HOOKS, ReplyHooks
from bot.conversation.prompts import (
    build_messages,
    own_tokens,
    settled_reply,
    speaker_names,
    strip_echoed_label,
)
from bot.conversation.viewing import viewed_memory, with_refusal
from bot.errors import ContextLengthExceeded, LLMError, LLMInputRejected, OverQuota
from bot.llm.client import LLM
from bot.messages import DeltaSink, IncomingMessage, Reply
from bot.ops.observe import ServiceObserver
from bot.settings.sections import ChatSettings
from memory.completion import ChatMessage
from memory.errors import AnsweredTurnGone, StoreError
from memory.manager import MemoryManager
from memory.models import MemoryView, NewTurn, Turn, TurnRef

if TYPE_CHECKING:
    from bot.missed.owed import OwedReplies

__all__ = ["MAX_REPLY_CHARS", "STORE_FAILED", "TOO_LONG", "ReplyJob", "ReplyParts", "cut"]

log = logging.getLogger(__name__)

MAX_REPLY_CHARS = 40_000  # Slack cuts a message's text beyond this; no sane reply is longer
TOO_LONG = (
    "That message is too long for me ({length:,} characters; I read at most {limit:,}). "
    "I kept the first {limit:,} characters in memory; please ask again in a shorter message."
)
STORE_FAILED = (
    "Sorry, I couldn't save your message just now, so I can't answer it. "
    "Please try again in a moment."
)

Images = Mapping[int, Sequence[ImagePart]]  # by request message index


def cut(text: str, limit: int, what: str = "message") -> str:
    """``text`` cut to ``limit`` characters plus a marker saying how many were not kept."""
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[…{what} cut: {len(text) - limit:,} more characters not kept]"


def _model_name(llm: LLM) -> str:
    """The model ``llm`` replies with, unless a channel chose another."""
    return str(getattr(llm, "model", "") or llm.name.partition(":")[2])


@dataclass(frozen=True, slots=True)
class ReplyParts:
    """What a reply job works with, handed over by ``ChatService`` when it creates one."""

    memory: MemoryManager
    llm: LLM
    config: ChatSettings
    budget: Budget
    channels: ChannelConfig
    quota: Quota
    attachments: AttachmentIntake
    observer: ServiceObserver
    owed: OwedReplies | None  # replies owed to mentions, across crashes (bot.missed.owed)
    identity: Callable[[str], tuple[str, str]]  # (bot id, bot name) on a platform
    features: ReplyHooks = NO_HOOKS  # what the features add to a prompt (bot.features)


@dataclass(slots=True)
class Request:
    """What one model request is made of, as ``gather`` found it; the retries narrow it."""

    persona: str
    model: str | None  # a channel's choice; None: the endpoint's default
    params: str | None  # a channel's request fields (JSON), over MODEL_PARAMS
    budget: int  # tokens left for the memory view
    view: MemoryView
    chain: Chain = field(default_factory=Chain)
    viewed: MemoryView | None = None  # the channel the person is looking at
    images: Images = field(default_factory=dict)
    own: Sequence[str] = ()  # the features' lines for the author (their notes)


class ReplyJob:
    """The reply owed to ``msg`` (turn ``seq``; None: the message is not stored, so the
    answer sees that message alone and is not stored either). ``notice``: a ready-made
    sentence (a failure, a limit) instead of the model's answer. ``settings``: the channel's,
    read again when the job is made if None (a late answer)."""

    def __init__(self, parts: ReplyParts, msg: IncomingMessage, *, seq: int | None = None,
                 settings: ChannelSettings | None = None, notice: str | None = None) -> None:
        self.parts, self.msg, self.seq = parts, msg, seq
        self.settings, self.notice = settings, notice
        # An author who may not read the channel's history (``reads_history``) gets an
        # answer from their message alone: the channel's memory, its chain included, is it.
        self.alone = seq is None or not msg.reads_history

    # ------------------------------------------------------------ what ReplyFlow runs

    async def placed(self, shown: str) -> None:
        """Remember ``shown`` (the platform message shown while the reply is made; "": none
        any more) on the debt, so a late answer after a crash replaces it."""
        owed, msg = self.parts.owed, self.msg
        if owed is not None and owed.is_answering(msg.key, msg.message_id):
            await owed.showing(msg.key, msg.message_id, shown)

    async def make(self, sink: DeltaSink | None) -> Reply | None:
        """The reply (the model's streamed through ``sink`` when one is given), within the
        channel's settings and the daily quotas; None: nothing to send (a quota notice told
        already). A store failure becomes a sentence."""
        if self.notice is not None:
            return Reply(self.notice, failed=True)
        msg, quota = self.msg, self.parts.quota
        settings = self.settings or await self.parts.channels.get(msg.key)
        try:  # the model calls are metered on the person's and server's daily quotas
            with quota.paying(msg.key, "reply", msg.author_id, direct=msg.is_direct,
                              settings=settings):
                try:
                    return await self.answer(sink, settings)
                except OverQuota as e:  # refused: the private notice, once a day
                    return await quota.refused(e, msg.key, msg.author_id)
        except StoreError as e:
            self.parts.observer.store_error(type(e).__name__)
            log.error("reply to %s in %s failed on the store: %s", msg.message_id, msg.key, e,
                      exc_info=e)
            return Reply(STORE_FAILED, failed=True)

    async def settled(self, delivered: bool, *, recorded: bool = False) -> None:
        """The reply delivered (or nothing was to be sent), or not (failed, or cut short by
        shutdown): then it is answered again later (``bot.missed.owed``). ``recorded``: the
        outbox settled the debt with the answer's last message already."""
        if self.parts.owed is not None:
            await self.parts.owed.finished(self.msg.key, self.msg.message_id,
                                           delivered=delivered, recorded=recorded)

    # ------------------------------------------------------------ the model's answer

    async def answer(self, sink: DeltaSink | None, settings: ChannelSettings) -> Reply:
        """The model's answer: gathered, generated (retried as the errors allow), kept."""
        msg, observer, started = self.msg, self.parts.observer, time.monotonic()
        request = await self.gather(settings)
        observer.recalled(msg.key, time.monotonic() - started)
        try:
            try:
                text = await self.generate(request, request.view, sink, request.images)
            except LLMInputRejected:
                if not any(request.images.values()):
                    raise
                text = await self.generate_without_images(request, sink)
        except ContextLengthExceeded:
            if self.alone:
                return Reply(TOO_LONG.format(length=len(msg.text), limit=len(msg.text) // 2),
                             failed=True)
            try:
                text = await self.generate_compacted(request, sink)
            except LLMError as e:
                return self._failed(request, started, e)
        except LLMError as e:
            return self._failed(request, started, e)
        observer.replied(msg.key, time.monotonic() - started, request.view.tokens,
                         self.seq or 0, False)
        return await self.keep(text)

    async def gather(self, settings: ChannelSettings) -> Request:
        """Step 1: what the request shows, each part paid for out of the memory budget:
        the files read (this message's and, waiting until one deadline, those of the
        messages shown), the images a vision model gets, the reply chain, the viewed
        channel, then the memory view through ``seq``."""
        msg, files_in, memory = self.msg, self.parts.attachments, self.parts.memory
        persona, budget = self._persona(settings)
        model = settings.chosen("model")
        stored = cut(msg.text, self.parts.config.max_input_chars)
        until = files_in.deadline()
        files = await files_in.settle(msg, stored, store=self.seq is not None, until=until)
        seer = "" if self.parts.llm.is_offline else model or _model_name(self.parts.llm)
        images = files_in.images_for(files, seer, budget // 2)
        budget -= sum(p.tokens for p in images) + files_in.note_tokens(msg.key)
        chain = Chain() if self.alone else await self._chain(budget)  # paid before the view
        budget -= chain.tokens
        own = await self.parts.features.prompt_lines(msg, budget // 4)  # the author's notes
        budget -= own_tokens(own, memory.tokenizer)
        viewed, cost = ((None, 0) if not msg.reads_history  # the channel in view
                        else await viewed_memory(memory, msg, budget))
        budget -= cost
        view = await self._view(budget, files, stored, until)
        chain = chain.without(view)
        view = chain.unrecalled(view)
        shown = {len(view.turns): images} | files_in.earlier_images(
            view.turns, seer, budget - view.tokens)
        return Request(persona, model, settings.chosen("params"), budget, view, chain, viewed,
                       shown, own)

    def _persona(self, settings: ChannelSettings) -> tuple[str, int]:
        """The channel's persona and the memory budget left beside it: a long persona is cut
        so that it never crowds out more than half the conversation."""
        persona, tok = settings.persona, self.parts.memory.tokenizer
        budget, floor = self._memory_budget(persona), self._memory_budget() // 2
        if budget < floor:
            persona = tok.truncate(persona, max(0, tok.count(persona) - (floor - budget)))
            budget = floor
        return persona, budget

    def _memory_budget(self, persona: str | None = None) -> int:
        """Tokens left for summary, facts and turns once the fixed parts are paid for."""
        return self.parts.budget.memory_with(persona or self.parts.config.system_prompt,
                                             self.parts.memory.tokenizer)

    async def _chain(self, budget: int) -> Chain:
        """The reply chain the message belongs to, fitted into its share of ``budget``;
        none when it cannot be read (the reply is worth more than the chain)."""
        msg, memory = self.msg, self.parts.memory
        if msg.chain is None:
            return Chain()
        try:
            turns = await read_chain(memory.store, msg)
        except Exception:
            log.warning("could not read the reply chain of %s in %s; answering without it",
                        msg.message_id, msg.key, exc_info=True)
            return Chain()
        return fit_chain(turns, int(budget * CHAIN_SHARE), memory.tokenizer)

    async def _view(self, budget: int, files: Settled | None, stored: str, until: float
                    ) -> MemoryView:
        """The memory view through ``seq`` (read again once the earlier messages' files
        arrived), or the message alone; files still on their way say so."""
        msg, files_in, memory = self.msg, self.parts.attachments, self.parts.memory
        if self.alone:
            lone = Turn(msg.key, 0, msg.message_id, "user", msg.author_id, msg.author_name,
                        files.text if files else stored, 0, msg.sent_at)
            view = MemoryView(msg.key, "", 0, (), 0, (lone,), 0)
        else:
            view = await memory.view(msg.key, budget, through_seq=self.seq, recall=True)
            if await files_in.wait_for(view, until):  # earlier messages' files
                view = await memory.view(msg.key, budget, through_seq=self.seq, recall=True)
        return files_in.mark_unread(view)

    async def generate_without_images(self, request: Request, sink: DeltaSink | None) -> str:
        """Step 2 again after the endpoint refused the request with its images: asked
        without them; accepted so, the images were what it refused, and they are marked so
        (a 400 about something else fails this retry too, and leaves them as they are)."""
        text = await self.generate(request, _without_parts(request.view, request.images), sink)
        request.view = await self._refused(request.view, request.images)
        return text

    async def generate_compacted(self, request: Request, sink: DeltaSink | None) -> str:
        """Step 2 once more, after the model said the prompt was too long: the channel is
        compacted now (the one time a reply waits for it) and read in half the budget."""
        msg, memory = self.msg, self.parts.memory
        log.warning("context length exceeded in %s; compacting and retrying once", msg.key)
        try:
            await memory.compact_now(msg.key, force=True)
        except Exception:
            log.warning("forced compaction of %s failed", msg.key, exc_info=True)
        view = self.parts.attachments.mark_unread(await memory.view(
            msg.key, request.budget // 2, through_seq=self.seq, recall=True))
        request.chain = request.chain.without(view)
        request.view = request.chain.unrecalled(view)
        return await self.generate(request, request.view, sink)

    def prompt(self, request: Request, view: MemoryView, images: Images | None = None
               ) -> list[ChatMessage]:
        """The request's messages (``bot.conversation.prompts``), with ``images`` attached."""
        return with_images(build_messages(request.persona, view, request.chain.turns,
                                          request.viewed, own=request.own), images or {})

    async def generate(self, request: Request, view: MemoryView, sink: DeltaSink | None,
                       images: Images | None = None) -> str:
        """The model's text for ``view`` (streamed through ``sink`` when given), an echoed
        "[Name]: " label taken off."""
        messages = self.prompt(request, view, images)
        llm, reply_tokens = self.parts.llm, self.parts.budget.reply_tokens
        extra: dict[str, Any] = {"model": request.model} if request.model else {}
        if request.params:
            extra["params"] = json.loads(request.params)
        names = speaker_names(view)
        if sink is None:
            completion = await llm.complete(messages, max_tokens=reply_tokens,
                                            purpose="reply", **extra)
            return strip_echoed_label(completion.text, names) or completion.text
        parts: list[str] = []
        async for delta in llm.stream(messages, max_tokens=reply_tokens, purpose="reply",
                                      **extra):
            parts.append(delta)
            shown = settled_reply("".join(parts), names)
            if shown:  # None while the start may still be an echoed "[Name]: " label
                await sink(shown)
        text = strip_echoed_label("".join(parts), names).strip()
        if not text:
            raise LLMError("empty streamed reply")
        return text

    async def _refused(self, view: MemoryView, shown: Images) -> MemoryView:
        """The endpoint took the request without the images ``shown`` that it refused with
        them: each is marked refused in its turn (and in storage, when the message is
        stored), so no later request sends it again; ``view`` so marked."""
        turns = list(view.turns)
        for at, parts in shown.items():
            if not parts or not 0 < at <= len(turns):
                continue
            turn = turns[at - 1]
            text = await self.parts.attachments.refused(turn.key, turn.message_id, turn.text,
                                                        parts, store=self.seq is not None)
            turns[at - 1] = replace(turn, text=text)
        log.warning("the model endpoint refused a request with %d image(s) in %s; answered "
                    "without them, and they are not sent again", sum(map(len, shown.values())),
                    view.key)
        return replace(view, turns=tuple(turns))

    def _failed(self, request: Request, started: float, error: LLMError) -> Reply:
        """The model failed: observed, logged with its stack, told in a sentence."""
        self.parts.observer.replied(self.msg.key, time.monotonic() - started,
                                    request.view.tokens, self.seq or 0, True)
        log.error("reply in %s failed: %s", self.msg.key, error, exc_info=error)
        return Reply(error.user_message, failed=True)

    # ------------------------------------------------------------ kept

    async def keep(self, text: str) -> Reply:
        """Step 3: the answer, cut when over-long, recorded as ``reply:<trigger id>`` (a
        message answered before a crash gets the stored text again); not stored when the
        message is not, or was forgotten meanwhile."""
        msg, observer = self.msg, self.parts.observer
        if len(text) > MAX_REPLY_CHARS:
            log.warning("the model's answer in %s was %d characters; cut to %d",
                        msg.key, len(text), MAX_REPLY_CHARS)
            text = cut(text, MAX_REPLY_CHARS, "answer")
        if self.seq is None:
            return Reply(with_refusal(msg, text))
        bot_id, bot_name = self.parts.identity(msg.key.platform)
        try:
            text = (await self.parts.memory.record(NewTurn(
                msg.key, f"reply:{msg.message_id}", "assistant", bot_id, bot_name, text, 0,
                time.time(), answers=TurnRef(self.seq, msg.message_id)))).turn.text
            observer.recorded(msg.key, "assistant")
        except AnsweredTurnGone:  # the answer, made from what was forgotten, is not kept
            log.info("message %s in %s was forgotten while it was answered; the answer is "
                     "not stored", msg.message_id, msg.key)
        except StoreError as e:  # the answer is still worth giving; memory lacks only it
            observer.store_error(type(e).__name__)
            log.error("could not record the reply to %s in %s: %s", msg.message_id, msg.key,
                      e, exc_info=e)
        return Reply(with_refusal(msg, text))


def _without_parts(view: MemoryView, shown: Images) -> MemoryView:
    """``view`` for a retry after the endpoint refused a request with the images ``shown``:
    each of them marked refused in its turn's text, so the retry goes without them and the
    model reads that they could not be read. Nothing is stored: whether the images were at
    fault, the retry tells."""
    turns = list(view.turns)
    for at, parts in shown.items():
        if parts and 0 < at <= len(turns):
            turn = turns[at - 1]
            turns[at - 1] = replace(turn, text=mark_refused(
                turn.text, [p.line for p in parts if p.line]))
    return replace(view, turns=tuple(turns))
