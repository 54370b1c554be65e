"""What adapters hand the service, and what the service hands back.

Adapters translate platform events into these plain values (and send the results); the
service never holds a platform object. A message is handed over once
(``ChatService.receive``); the answer is a ``Received``: what became of the message and,
when a reply is owed, the ``PendingReply`` that ``bot.conversation.reply_flow.ReplyFlow`` delivers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from memory.models import ChannelKey

__all__ = ["Attachment", "ChainLink", "ChainSource", "CommandResult", "DeltaSink",
           "IncomingMessage", "Outcome", "PendingReply", "Received", "Refresh", "Reply",
           "ReplySteps", "Viewing"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file shared with a message, from the platform's event (never from message text).

    ``placeholder`` is the note standing for it in the message's text (``[attachment:
    name]``), which its reading replaces in the stored turn; ``size`` is what the platform
    declared (None: unknown), checked before any download.
    """

    name: str
    url: str
    size: int | None = None
    content_type: str = ""
    placeholder: str = ""


DeltaSink = Callable[[str], Awaitable[None]]  # called with a streamed reply's text so far


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One message of the chain a message replies to (the message it references, that
    one's, and so on up), as the adapter found it. ``text`` None: the adapter did not
    read it, and the service looks the message up in storage by ``message_id``."""

    message_id: str
    author_name: str = ""
    text: str | None = None
    sent_at: float = 0.0
    own: bool = False  # the bot's own message


ChainSource = Callable[[], Awaitable[tuple[ChainLink, ...]]]
"""The chain a message replies to, nearest first, read only when a reply is composed (so
reading it, perhaps from the platform's API, never delays recording messages in order)."""


@dataclass(frozen=True, slots=True)
class Viewing:
    """The channel a person is looking at while they ask (Slack's assistant pane shows the
    bot beside a channel). ``readable`` is the read check's answer for the author, asked by
    the adapter (``bot.read_check.refusal``): only then may the reply's prompt draw on what
    the bot remembers of ``key``."""

    key: ChannelKey
    readable: bool


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """One human message as the service sees it, platform-neutral."""

    key: ChannelKey
    message_id: str
    author_id: str
    author_name: str
    text: str
    sent_at: float
    mentions_bot: bool = False
    is_direct: bool = False
    reply_to_bot: bool = False
    route: str = ""  # what the adapter needs to answer it later (Slack: the thread's ts)
    # files shared with it, from the platform's event (bot.attachments reads them)
    attachments: tuple[Attachment, ...] = ()
    # who may talk to the bot (bot.access): the author's role ids where the platform has
    # roles (None: it has none), and the channel a thread is in
    roles: tuple[str, ...] | None = None
    parent: str = ""
    # whether the author may read the channel's history (Discord: View Channel and Read
    # Message History; a member without it sees only what arrives while they look): a reply
    # to someone who may not is built from their message alone, without the channel's memory
    reads_history: bool = True
    # the reply chain it belongs to (bot.conversation.chain puts it into the prompt)
    chain: ChainSource | None = None
    # another channel whose memory the reply may draw on (the one the person is viewing)
    viewing: Viewing | None = None


Refresh = Callable[[IncomingMessage], Awaitable[IncomingMessage]]
"""What the platform says now about a stored message's author and place (``is_direct``,
``roles``, ``parent``), filled into a message rebuilt from storage: a late answer asks the
access lists (``bot.access``) with it, as they stand when the answer is given."""


@dataclass(frozen=True, slots=True)
class Reply:
    """The bot's answer. ``failed`` marks a short error sentence instead of a model answer;
    ``private`` asks the adapter to show it to the author only (Slack: ephemeral; Discord:
    a direct message), e.g. the daily quota notice."""

    text: str
    failed: bool = False
    private: bool = False


@dataclass(frozen=True, slots=True)
class CommandResult:
    """Text for the caller of a slash command, and whether the command did its work."""

    text: str
    ok: bool = True


class Outcome(Enum):
    """What became of a received message."""

    RECORDED = "recorded"  # stored now (or a re-delivery whose reply is still owed)
    REDELIVERED = "redelivered"  # stored before; answered (or being answered) already
    NOT_RECORDED = "not recorded"  # the channel keeps nothing of it (``record`` setting)
    STORE_FAILED = "store failed"  # not stored: the platform should deliver it again
    TOO_LONG = "too long"  # stored cut; the reply is a request for something shorter
    RATE_LIMITED = "rate limited"  # stored; the person asks too fast to be answered


class ReplySteps(Protocol):
    """The steps of an owed reply that ``ReplyFlow`` runs, by name, in this order;
    ``bot.conversation.reply_job.ReplyJob`` is the service's."""

    async def placed(self, shown: str) -> None:
        """Remember ``shown``, the platform message shown while the reply is made ("": none
        any more), on the debt, so a late answer replaces it."""

    async def make(self, sink: DeltaSink | None) -> Reply | None:
        """The reply, streamed through ``sink`` when one is given; None: nothing to send
        (e.g. a quota notice told already)."""

    async def settled(self, delivered: bool, *, recorded: bool = False) -> None:
        """The delivery, reported (False: answer it again later); ``recorded``: the debt
        was settled already, in the transaction that recorded the answer's last message."""


@dataclass(frozen=True, slots=True)
class PendingReply:
    """A reply owed to ``msg``, not yet made: ``job`` makes it, step by step.
    ``owed``: the debt is recorded, so a reply cut short is answered after a restart.
    ``placeholder`` is the message an earlier attempt showed (a late answer goes into it);
    ``late``: the answer to a mention a crash left unanswered."""

    msg: IncomingMessage
    outcome: Outcome
    job: ReplySteps
    owed: bool = False  # recorded as owed: cut short, it is answered after a restart
    placeholder: str = ""
    late: bool = False

    @property
    def notice(self) -> bool:
        """A ready-made sentence (a failure, a limit), not a model answer."""
        return self.outcome is not Outcome.RECORDED and self.outcome is not Outcome.NOT_RECORDED


@dataclass(frozen=True, slots=True)
class Received:
    """The service's answer to a received message."""

    outcome: Outcome
    reply: PendingReply | None = None

    @property
    def stored(self) -> bool:
        """Durable, or nothing to keep: the platform's delivery may be acknowledged."""
        return self.outcome is not Outcome.STORE_FAILED
