"""The outbox: every outgoing post (replies, late answers, digests) exactly once.

A post has an **outbox id** made from what it is (the reply to one message, a digest's
slot), so a retry after a crash names it the same way. ``Outbox.send`` records the intent
before posting and the platform's message id after; the platform carries the id with the
post (Discord: the message ``nonce``, enforced; Slack: the message ``metadata``). A retry
that finds an intent without a recorded id asks the platform's outlet to **find** the
earlier post before posting again; one with a recorded id posts nothing.

Replies settle their debt (``bot.missed.owed``) in the transaction that records their last
message, so a crash leaves either both or neither; a reply's first intent is recorded
while its answer is made (``intend``). A late answer goes **into** the placeholder the
first attempt showed (``OwedReply.placeholder``): an edit is idempotent, so it is
replaced, never left beside a second answer (one that cannot be edited is deleted). A
post whose outcome is unknown is looked up before it is posted again (``bot.conversation.lookup``).

What is guaranteed: one post per outbox id while the outbox row lives (a week) and the
platform can find it (Slack: in the thread or among the channel's last 200 messages;
Discord: within its nonce window of a few minutes). A store that cannot be written does
not stop a post: it is sent without the guarantee (logged).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from bot.conversation.lookup import looked_up
from bot.conversation.posts import Post, PostOutlet
from bot.errors import OutcomeUnknown
from bot.stores.outbox import OutboxStore
from memory.errors import StoreUnavailableError
from memory.models import ChannelKey

__all__ = [
    "APOLOGY",
    "PLACEHOLDER",
    "Delivered",
    "Intent",
    "Outbox",
    "Post",
    "PostOutlet",
    "answer_id",
    "digest_id",
    "placeholder_id",
    "reply_id",
]

log = logging.getLogger(__name__)
PLACEHOLDER, APOLOGY = -1, -2  # reply parts that are not the answer: "thinking…", a sorry


def reply_id(key: ChannelKey, message_id: str, part: int, *, notice: bool = False) -> str:
    """The outbox id of part ``part`` of the reply to ``message_id``; a ``notice`` (a failed
    reply: "couldn't save", over a limit…) has ids of its own, so the answer a later
    delivery of the message gets is not mistaken for it."""
    kind = "notice" if notice else "reply"
    return f"{kind}:{key.platform}:{key.workspace}:{key.channel}:{message_id}#{part}"


def placeholder_id(key: ChannelKey, message_id: str) -> str:
    """The outbox id the placeholder ("thinking…") of the reply to ``message_id`` carries,
    so a late answer finds it even when it was never remembered on the debt."""
    return reply_id(key, message_id, PLACEHOLDER)


def answer_id(key: ChannelKey, invocation: str, part: int) -> str:
    """The outbox id of part ``part`` of a command's public answer; ``invocation`` names the
    one use of the command (Slack: its ``trigger_id``)."""
    return f"answer:{key.platform}:{key.workspace}:{key.channel}:{invocation}#{part}"


def digest_id(key: ChannelKey, slot_at: float, part: int) -> str:
    """The outbox id of part ``part`` of the digest of ``slot_at`` (``part`` -1: the
    heading a threaded digest is posted under)."""
    return f"digest:{key.platform}:{key.workspace}:{key.channel}:{slot_at:.0f}#{part}"


@dataclass(frozen=True, slots=True)
class Intent:
    """The intent to post ``outbox_id``, recorded ahead of the post (``Outbox.intend``):
    ``earlier`` is what an earlier attempt left (None: nothing; ``""``: it may have posted;
    else the platform id it recorded)."""

    outbox_id: str
    earlier: str | None
    key: ChannelKey | None = None  # the channel it is posted in
    fresh: bool = False  # read again just before sending (``Outbox.refreshed``)


@dataclass(frozen=True, slots=True)
class Delivered:
    """What ``Outbox.send_all`` did: every message delivered (its truth value), and whether
    the debt was settled in the last one's record (then nobody settles it again)."""

    delivered: bool
    settled: bool = False

    def __bool__(self) -> bool:
        return self.delivered


@dataclass(frozen=True, slots=True)
class _Sent:
    posted: str | None  # the platform id; None: not delivered
    settled: bool = False


class Outbox:
    """Intent → post → record, for every outlet (see the module docstring)."""

    def __init__(self, store: OutboxStore | None) -> None:
        self.store = store  # None: posts go out without the guarantee (no database)

    async def send(self, outlet: PostOutlet, post: Post, *, into: str = "",
                   settle: str = "") -> str | None:
        """Deliver ``post`` once (into message ``into`` when given, e.g. a placeholder);
        its platform id, None if the platform refused it. ``settle``: see
        ``OutboxStore.outbox_posted``."""
        return (await self._send(outlet, post, into=into, settle=settle)).posted

    async def intend(self, post: Post) -> Intent:
        """Record the intent to post ``post`` now, ahead of its ``send`` (a reply's first
        message, while its answer is made): what an earlier attempt left, for ``send``."""
        return Intent(post.outbox_id, await self._intent(post), post.key)

    async def refreshed(self, intent: Intent) -> Intent:
        """``intent`` read again before its post goes out blind: read while the answer was
        made, it is stale (another replica may have taken the debt over meanwhile and
        recorded its post); only a recorded id counts (an intent without one is this
        attempt's own)."""
        if intent.earlier is not None or intent.fresh or intent.key is None:
            return intent
        again = await self._intent(Post(intent.key, intent.outbox_id, "", ""))
        return Intent(intent.outbox_id, again or None, intent.key, fresh=True)

    async def send_all(self, outlet: PostOutlet, posts: Sequence[Post], *, into: str = "",
                       settle: str = "", intent: Intent | None = None) -> Delivered:
        """Deliver a reply's messages in order (the first into ``into``); settle with the
        last. Whether every one was delivered, and whether the debt was settled with the
        last one's record. A message not delivered stops the rest: the
        next attempt skips those recorded and posts from it on, so the parts stand in order
        (posting past a gap would show part 3 above the part 2 a retry adds later).
        ``intent``: one post's intent, recorded already (``intend``)."""
        settled = False
        for i, post in enumerate(posts):
            last = i == len(posts) - 1
            sent = await self._send(outlet, post, into=into if i == 0 else "",
                                    settle=settle if last else "",
                                    intent=intent if intent and intent.outbox_id == post.outbox_id
                                    else None)
            if sent.posted is None:
                return Delivered(False)
            settled = sent.settled
        return Delivered(True, settled)

    async def _send(self, outlet: PostOutlet, post: Post, *, into: str, settle: str,
                    intent: Intent | None = None) -> _Sent:
        """``send``, saying too whether ``settle`` was recorded with the post."""
        outlet = looked_up(outlet)
        earlier = intent.earlier if intent is not None else await self._intent(post)
        found: str | None = None
        if not earlier and into and await outlet.edit(post, into):
            found = into
        if found is None and intent is not None:  # read while the answer was made
            earlier = (await self.refreshed(intent)).earlier
        if earlier:  # posted and recorded by an earlier attempt
            settled = bool(settle) and await self._posted(post, earlier, settle)
            await _clear(outlet, post, into, earlier)
            return _Sent(earlier, settled)
        if found is None and earlier == "":
            try:
                found = await outlet.find(post)
            except OutcomeUnknown as e:  # it may stand: a later retry looks again
                log.warning("could not look %s up (%s); not posting it blind", post.outbox_id, e)
                return _Sent(None)
            if found is not None:
                log.info("found %s posted before a crash; not posting it again", post.outbox_id)
        if found is None:
            found = await outlet.post(post)
        if found is None:
            return _Sent(None)
        settled = await self._posted(post, found, settle) and bool(settle)
        await _clear(outlet, post, into, found)
        return _Sent(found, settled)

    async def _intent(self, post: Post) -> str | None:
        if self.store is None:
            return None
        try:
            return await self.store.outbox_intent(post.key, post.outbox_id)
        except Exception as e:  # post anyway: an answer is worth more than the guarantee
            _failed(e, "could not record the intent to post %s; posting it without the "
                    "outbox", post.outbox_id)
            return None

    async def _posted(self, post: Post, message_id: str, settle: str) -> bool:
        """Record the post (settling ``settle``'s debt with it); whether it was recorded."""
        if self.store is None:
            return False
        try:
            await self.store.outbox_posted(post.key, post.outbox_id, message_id, settle=settle)
        except Exception as e:  # a retry finds the post on the platform instead
            _failed(e, "could not record the post %s", post.outbox_id)
            return False
        return True


async def _clear(outlet: PostOutlet, post: Post, into: str, posted: str) -> None:
    """The post stands as ``posted``, not in ``into`` (the edit was refused or given up):
    take ``into`` away, so no "thinking…" or half-streamed preview stays beside the post
    (and an edit that took effect unseen does not show the answer twice)."""
    if into and posted != into:
        log.info("%s stands apart from message %s; deleting that", post.outbox_id, into)
        await outlet.delete(post.key, into)


def _failed(error: Exception, what: str, *args: object) -> None:
    """Log a store failure: quietly when the store is down (it says so itself, once a
    minute), with the stack otherwise."""
    if isinstance(error, StoreUnavailableError):
        log.debug(what + ": %s", *args, error)
    else:
        log.warning(what, *args, exc_info=error)
