"""``ChatService``: what happens on a message, and nothing else. It is handed the parts it
uses (``bot.app`` composes them); the commands and the adapters are handed theirs too
(``bot.parts``), never reaching through it. Making a reply is
``bot.conversation.reply_job``'s, delivering it ``bot.conversation.reply_flow``'s.

An adapter hands each message over once (``receive``) and gets back a ``Received`` (an
``Outcome`` and, when a reply is owed, the ``PendingReply`` with its ``ReplyJob``). The message
is recorded first, so it is never lost whatever the model does; the reply is built from a
committed view read through that message's seq and recorded as ``reply:<trigger id>``, so a
re-delivered event is neither recorded nor answered twice. Compaction runs in the background
and never delays a reply, except once, on purpose, when the model says the prompt was too long.

Each limit has one outcome (SECURITY.md): an over-long message is stored cut with a marker
and answered with a request for something shorter; a person over ``user_rate_limit`` a
minute is told once and then only recorded; a store failure is logged once and the person
told briefly; an over-long model answer is cut with a marker. Channel settings
(``bot.channels.config``) pick persona, model and modes; quotas are ``bot.channels.quota``'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.access import AccessRules, Verdict
from bot.attachments.intake import AttachmentIntake
from bot.channels.config import ChannelConfig, ChannelSettings, Defaults, answers
from bot.channels.quota import Quota
from bot.conversation.budget import Budget
from bot.conversation.hooks import NO_HOOKS, FeatureSet
from bot.conversation.rate_limit import RateLimiter
from bot.conversation.reply_job import (
    MAX_REPLY_CHARS,
    STORE_FAILED,
    TOO_LONG,
    ReplyJob,
    ReplyParts,
    cut,
)
from bot.llm.client import LLM
from bot.messages import (
    IncomingMessage,
    Outcome,
    PendingReply,
    Received,
    Refresh,
)
from bot.ops.observe import NullObserver, ServiceObserver, bind_request
from bot.settings.sections import ChatSettings
from bot.stores.owed import OwedReply, ReplyDue
from memory.errors import StoreError, StoreUnavailableError
from memory.manager import MemoryManager
from memory.models import ChannelKey, NewTurn, RecordResult
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

RATE_LIMITED = (
    "You're asking me faster than I can answer (at most {limit} replies a minute). I still "
    "remember what you write; please ask again in a minute."
)


class ChatService:
    """The message pipeline: adapters hand it messages (``receive``), it calls memory and
    the LLM. Its parts are its own (no public attributes; the layout test checks)."""

    def __init__(self, memory: MemoryManager, llm: LLM, config: ChatSettings,
                 budget: Budget, *, clock: Callable[[], float] = time.monotonic,
                 owed: OwedReplies | None = None, channels: ChannelConfig | None = None,
                 quota: Quota | None = None, access: AccessRules | None = None,
                 attachments: AttachmentIntake | None = None,
                 observer: ServiceObserver | None = None,
                 features: FeatureSet = NO_HOOKS) -> None:
        self._memory = memory
        self._llm = llm
        self._config = config
        self._budget = budget
        self._clock = clock
        self._owed = owed  # replies owed to mentions, across crashes (bot.missed.owed)
        self._channels = channels or ChannelConfig(None, Defaults(
            config.system_prompt, "", "", (), config.record_mode,
            frozenset(config.always_reply_channels)))
        self._quota = quota or Quota(None)
        self._access = access or AccessRules()  # who may talk to the bot (bot.access)
        self._features = features  # the features' hooks (bot.features)
        self._identities: dict[str, tuple[str, str]] = {}
        # USER_RATE_LIMIT; reads the clock when asked
        self._rate = RateLimiter(config.user_rate_limit, lambda: self._clock())
        self._observer: ServiceObserver = observer or NullObserver()  # the admin's metrics
        # files people attach, read into their turns (bot.attachments)
        self._attachments = attachments or AttachmentIntake(memory)

    def set_identity(self, platform: str, bot_id: str, bot_name: str) -> None:
        """Record who the bot is on ``platform`` (after login), for its assistant turns.

        Per platform, because one process may run Discord and Slack at once.
        """
        self._identities[platform] = (bot_id, bot_name)
        self._observer.connected(platform)

    def identity(self, platform: str) -> tuple[str, str]:
        """(bot id, bot name) on ``platform``; the configured defaults until login."""
        return self._identities.get(platform, (self._config.bot_id, self._config.bot_name))

    def _bot_names(self, platform: str) -> tuple[str, str]:
        """Names a person may not be labelled with: the bot's here and the configured one."""
        return self.identity(platform)[1], self._config.bot_name

    async def receive(self, msg: IncomingMessage) -> Received:
        """Record ``msg`` (per the channel's ``record`` and ``reply_mode``) and say what
        became of it; when a reply is owed, ``Received.reply`` carries its ``ReplyJob``
        (``bot.conversation.reply_flow`` runs it). Once this returns, the message is durable
        or needs no storing."""
        # Cached and nobody waiting: no suspension. Else ChannelConfig queues callers per
        # channel in order, so messages reach record() in arrival order.
        settings = await self._channels.get(msg.key)
        admitted = self._admitted(msg, settings)
        if admitted is None:  # a channel the bot stays out of, or a person not recorded
            return Received(Outcome.NOT_RECORDED)
        addressed = admitted and answers(msg, settings)
        if settings.record == "off":  # privacy: nothing of this channel is stored
            return Received(Outcome.NOT_RECORDED, self._pending(
                msg, Outcome.NOT_RECORDED, settings=settings) if addressed else None)
        if settings.record == "addressed" and not addressed:
            return Received(Outcome.NOT_RECORDED)
        bind_request(msg.key, msg.message_id)
        due = self._owed.due(msg) if addressed and self._owed is not None else None
        try:  # no other await before record(): messages must be queued in arrival order
            result = await self._record(msg, due)
        except StoreError as e:
            self._not_recorded(msg, e)
            return Received(Outcome.STORE_FAILED, self._pending(
                msg, Outcome.STORE_FAILED, notice=STORE_FAILED) if addressed else None)
        owed = self._owed  # a re-delivery is answered only while its reply is still owed
        if not addressed or not (result.created or (owed and await owed.redelivered(msg))):
            # not for us, or a re-delivery we answered (or are answering)
            return Received(Outcome.RECORDED if result.created else Outcome.REDELIVERED)
        if due is not None and owed is not None and result.created:
            owed.answering(msg.key, msg.message_id)
        return await self._owed_reply(msg, result.turn.seq, settings)

    async def _record(self, msg: IncomingMessage, due: ReplyDue | None) -> RecordResult:
        """``msg`` stored as a user turn (cut to ``MAX_INPUT_CHARS``; ``due``: the reply it
        is owed), its files started reading."""
        text = cut(msg.text, self._config.max_input_chars)
        result = await self._memory.record(NewTurn(
            msg.key, msg.message_id, "user", msg.author_id,
            human_name(msg.author_name, self._bot_names(msg.key.platform)),
            text, 0, msg.sent_at, due))
        self._attachments.start(msg, text)  # files: read, then edit the turn
        if result.created:
            self._observer.recorded(msg.key, "user")
        return result

    def _not_recorded(self, msg: IncomingMessage, e: StoreError) -> None:
        """A store failure recording ``msg``: observed and logged (at DEBUG when the store
        reports it itself, once a minute)."""
        self._observer.store_error(type(e).__name__)
        if isinstance(e, StoreUnavailableError):
            log.debug("could not record message %s in %s: %s", msg.message_id, msg.key, e)
        else:
            log.error("could not record message %s in %s: %s", msg.message_id, msg.key, e,
                      exc_info=e)

    async def _owed_reply(self, msg: IncomingMessage, seq: int, settings: ChannelSettings
                          ) -> Received:
        """The reply a recorded message (turn ``seq``) is owed: a notice when it is over a
        limit (too long; its author asking too fast, told once a minute), else the model's
        answer."""
        limit, platform = self._config.max_input_chars, msg.key.platform
        if limit and len(msg.text) > limit:
            log.info("message %s in %s is %d characters (limit %d): stored cut, not answered",
                     msg.message_id, msg.key, len(msg.text), limit)
            return Received(Outcome.TOO_LONG, self._pending(
                msg, Outcome.TOO_LONG, notice=TOO_LONG.format(length=len(msg.text), limit=limit)))
        if not self._rate.allow(platform, msg.author_id):
            if not self._rate.first_telling(platform, msg.author_id):
                if self._owed is not None:  # told this minute; quiet, nothing owed
                    await self._owed.finished(msg.key, msg.message_id, delivered=True)
                return Received(Outcome.RATE_LIMITED)
            log.info("user %s on %s is over %d replies a minute", msg.author_id, platform,
                     self._config.user_rate_limit)
            return Received(Outcome.RATE_LIMITED, self._pending(
                msg, Outcome.RATE_LIMITED,
                notice=RATE_LIMITED.format(limit=self._config.user_rate_limit)))
        return Received(Outcome.RECORDED, self._pending(
            msg, Outcome.RECORDED, seq=seq, settings=settings))

    def _admitted(self, msg: IncomingMessage, settings: ChannelSettings) -> bool | None:
        """The access lists on ``msg`` (``bot.access``; the server's own in ``settings``):
        True, may be answered; False, may be stored but never answered (a blocked person);
        None, neither."""
        verdict = self._access.verdict(msg.key, msg.author_id, msg.roles, direct=msg.is_direct,
                                      parent=msg.parent, server=settings.access)
        if verdict is Verdict.ADMITTED:
            return True
        log.debug("message %s in %s by %s: %s not admitted", msg.message_id, msg.key,
                  msg.author_id, verdict.value)
        return False if self._access.records(verdict) else None

    async def answer(self, owed: OwedReply, refresh: Refresh | None = None
                     ) -> PendingReply | None:
        """The late reply to a recorded message whose reply was never delivered (the
        missed-mention sweep, ``bot.conversation.sweep``); None when the message is gone (deleted,
        ``/reset``) or the access lists refuse it now (the person or the channel was
        blocked since, DMs turned off): ``refresh`` (the adapter's) says who and where the
        author is now."""
        found = await self._memory.store.turns_at(owed.key, [owed.seq])
        if not found or found[0].message_id != owed.message_id:
            return None
        t = found[0]
        msg = IncomingMessage(t.key, t.message_id, t.author_id, t.author_name, t.text,
                              t.sent_at, mentions_bot=True, route=owed.route)
        if refresh is not None:
            msg = await refresh(msg)
        if not self._admitted(msg, await self._channels.get(msg.key)):
            log.info("not answering message %s in %s late: the access lists refuse it now",
                     msg.message_id, msg.key)
            return None
        return replace(self._pending(msg, Outcome.RECORDED, seq=t.seq),
                       placeholder=owed.placeholder, late=True)

    def _pending(self, msg: IncomingMessage, outcome: Outcome, *, seq: int | None = None,
                 settings: ChannelSettings | None = None, notice: str | None = None
                 ) -> PendingReply:
        """The reply owed to ``msg`` as a ``ReplyJob`` (``bot.conversation.reply_job``): the
        model's answer to turn ``seq`` (None: not stored), or the sentence ``notice``."""
        job = ReplyJob(self._parts(), msg, seq=seq, settings=settings, notice=notice)
        owed = self._owed is not None and self._owed.is_answering(msg.key, msg.message_id)
        return PendingReply(msg, outcome, job, owed=owed)

    def _parts(self) -> ReplyParts:
        """What a reply job works with: the parts the service was handed."""
        return ReplyParts(self._memory, self._llm, self._config, self._budget, self._channels,
                          self._quota, self._attachments, self._observer, self._owed,
                          self.identity, self._features)

    async def backfilled(self, msg: IncomingMessage) -> bool:
        """Remember a message missed while the bot was away (backfill); never answer it
        here. An addressed one younger than ``ANSWER_MISSED_SECONDS`` is recorded with an
        unclaimed debt, which the missed-mention sweep answers once.

        The same rules as a live message decide whether it is stored (the channel's
        ``record`` and ``reply_mode``, ``MAX_INPUT_CHARS``), and the same message id makes
        it the same turn, so a live delivery and a backfill of one message store it once.
        True when it was new.
        """
        settings = await self._channels.get(msg.key)
        admitted = self._admitted(msg, settings)
        if admitted is None:
            return False
        addressed = admitted and answers(msg, settings)
        if settings.record == "off" or (settings.record == "addressed" and not addressed):
            return False
        due = None
        if addressed and self._owed is not None and self._owed.young(msg.sent_at):
            # A mention posted while the bot was down is owed a reply like one a crash left
            # unanswered: recorded unclaimed, so the sweep (``bot.conversation.sweep``)
            # answers it once.
            due = self._owed.due(msg)
            due = replace(due, owner="") if due is not None else None
        name = human_name(msg.author_name, self._bot_names(msg.key.platform))
        turn = NewTurn(msg.key, msg.message_id, "user", msg.author_id, name,
                       cut(msg.text, self._config.max_input_chars), 0, msg.sent_at, due)
        created = (await self._memory.record(turn)).created
        self._attachments.start(msg, turn.text)  # files: read, then edit the turn
        return created

    async def edited(self, key: ChannelKey, message_id: str, text: str) -> None:
        """A platform edit: update the turn if it is not summarized yet."""
        text = self._attachments.reapply(key, message_id, cut(text, self._config.max_input_chars))
        outcome = await self._memory.edit(key, message_id, text)
        log.debug("edit of %s in %s: %s", message_id, key, outcome)

    async def deleted(self, key: ChannelKey, message_id: str) -> None:
        """A platform delete: remove the turn if it is not summarized yet."""
        outcome = await self._memory.delete(key, message_id)
        log.debug("delete of %s in %s: %s", message_id, key, outcome)
