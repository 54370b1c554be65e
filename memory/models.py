"""The data model of gistbot's memory: channels, turns, summary state and the view a reply reads.

Everything here is a plain frozen dataclass so it can cross task and process boundaries
and be compared in tests. Nothing here knows about Discord, Slack or HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CarriedIdentifier",
    "ChannelKey",
    "ChannelStats",
    "Episode",
    "LongTermFact",
    "MemoryView",
    "NewEpisode",
    "NewLongTermFact",
    "NewTurn",
    "Recall",
    "RecordResult",
    "Role",
    "SummaryState",
    "Turn",
    "TurnRef",
]

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True, order=True)
class ChannelKey:
    """Which conversation a turn belongs to.

    Discord: (``"discord"``, guild id or ``"dm"``, channel id); threads are channels.
    Slack: (``"slack"``, team id, channel id); thread messages belong to their channel.
    """

    platform: str
    workspace: str
    channel: str

    def __str__(self) -> str:
        return f"{self.platform}:{self.workspace}:{self.channel}"


@dataclass(frozen=True, slots=True)
class NewTurn:
    """A message about to be recorded; the store assigns its ``seq``."""

    key: ChannelKey
    message_id: str
    role: Role
    author_id: str
    author_name: str
    text: str
    tokens: int
    sent_at: float  # unix seconds
    # What another store writes with this turn in its transaction when the turn is created
    # (the reply it is owed); the memory store hands it to its ``on_record`` hooks unread.
    extra: object | None = None
    # Record only while this turn is stored (an answer: the message it answers). A reset
    # or delete in between leaves nothing recorded; the store checks it in the insert's
    # transaction, so no reset can fall between the check and the insert.
    answers: TurnRef | None = None


@dataclass(frozen=True, slots=True)
class TurnRef:
    """A stored turn by seq and message id: the seq alone could be a later message's
    after an import, the message id alone one recorded again after a reset."""

    seq: int
    message_id: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One stored message. ``seq`` increases per channel; ``message_id`` is unique per channel."""

    key: ChannelKey
    seq: int
    message_id: str
    role: Role
    author_id: str
    author_name: str
    text: str
    tokens: int
    sent_at: float


@dataclass(frozen=True, slots=True)
class RecordResult:
    """What ``record()`` did: the stored turn, and whether this call created it.

    ``pending_hint`` is an upper bound on the channel's unfolded turns right after the
    insert (``seq - folded_through``; deleted turns make it over-count), read for free in
    the same statement, so the manager can skip a count query on most records. ``None``
    when unknown. ``pending`` is the exact (count, tokens) of the unfolded turns right
    after the insert, read in its transaction: compaction's check needs no read of its
    own on the reply path. ``None`` when the store does not say.
    """

    turn: Turn
    created: bool
    pending_hint: int | None = None
    pending: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class CarriedIdentifier:
    """An identifier carried forward verbatim because a summary dropped it.

    ``last_seen_seq`` orders facts by how recently the conversation mentioned them: when
    the facts list is over its token bound, the least recently mentioned leave the prompt
    (they stay in the database and come back when mentioned again).
    """

    value: str
    context: str
    first_seq: int
    last_seen_seq: int


@dataclass(frozen=True, slots=True)
class NewEpisode:
    """What one compaction folded, to be archived with its commit (the store assigns ``id``).

    ``text`` is the episode summary the summarizer wrote in the same call as the rolling
    summary (or an extractive line when the model left it out). Episodes are never
    rewritten; only ``reset`` and retention delete them.
    """

    first_seq: int
    last_seq: int
    started_at: float
    ended_at: float
    speakers: tuple[str, ...]
    text: str


@dataclass(frozen=True, slots=True)
class Episode:
    """An archived episode: a stretch of folded turns and what happened in it."""

    key: ChannelKey
    id: int
    first_seq: int
    last_seq: int
    started_at: float
    ended_at: float
    speakers: tuple[str, ...]
    text: str


@dataclass(frozen=True, slots=True)
class NewLongTermFact:
    """A durable statement to store: extracted by a compaction or pinned with ``/remember``.

    ``supersedes`` names the id of an older fact of the same channel that this one updates
    ("the deadline moved to Monday" supersedes "the deadline is Friday"); the old fact stays,
    marked superseded. ``source_seqs`` are the turns it came from (empty for a pin).
    """

    text: str
    source_seqs: tuple[int, ...] = ()
    author: str = ""
    pinned: bool = False
    supersedes: int | None = None


@dataclass(frozen=True, slots=True)
class LongTermFact:
    """A stored long-term fact of a channel (table ``memory_facts``).

    Not the same thing as ``CarriedIdentifier``: a ``CarriedIdentifier`` is an identifier
    the rolling summary dropped, carried verbatim; a ``LongTermFact`` is a statement
    ("order 1042 — refund approved on 3 March") retrieved by relevance. ``superseded_by``
    is the id of the newer fact that replaced it, or None while it is current.
    """

    key: ChannelKey
    id: int
    text: str
    source_seqs: tuple[int, ...]
    author: str
    pinned: bool
    created_at: float
    superseded_by: int | None = None

    @property
    def superseded(self) -> bool:
        """Whether a newer fact replaced this one."""
        return self.superseded_by is not None


@dataclass(frozen=True, slots=True)
class Recall:
    """What retrieval selected for one reply: facts (current first) and episodes, best first,
    and stored turns no longer verbatim in the prompt that match the message (with their
    neighbours; in a view they are in ``seq`` order, as search results best first)."""

    facts: tuple[LongTermFact, ...] = ()
    episodes: tuple[Episode, ...] = ()
    turns: tuple[Turn, ...] = ()


@dataclass(frozen=True, slots=True)
class SummaryState:
    """A channel's committed memory header.

    ``version`` increases on every commit, edit, delete and reset, so a compaction that read
    version N can commit only if nothing changed the folded range meanwhile.
    Turns with ``seq <= folded_through`` are represented by ``text`` (and ``facts``).
    """

    key: ChannelKey
    text: str = ""
    version: int = 0
    folded_through: int = 0
    last_compacted_at: float | None = None
    compactions: int = 0
    facts: tuple[CarriedIdentifier, ...] = ()


@dataclass(frozen=True, slots=True)
class ChannelStats:
    """Counts for the ``/summary`` footer and for ``stats()``."""

    key: ChannelKey
    turns: int
    folded: int
    pending: int
    pending_tokens: int
    summary_tokens: int
    facts: int
    compactions: int
    last_compacted_at: float | None
    version: int

    @classmethod
    def empty(cls, key: ChannelKey) -> ChannelStats:
        """The counts of a channel with nothing stored."""
        return cls(key, 0, 0, 0, 0, 0, 0, 0, None, 0)


@dataclass(frozen=True, slots=True)
class MemoryView:
    """What a reply prompt gets: the summary, the carried facts and the newest turns that fit.

    ``recall`` holds archive items retrieved for the triggering message (``recall_tokens``
    is their cost in the prompt, headings included); empty unless the view asked for it.

    ``dropped`` counts unfolded turns left out of the prompt because compaction lags;
    they are still stored. ``truncated`` is true when one oversized turn was cut.
    """

    key: ChannelKey
    summary: str
    summary_tokens: int
    facts: tuple[CarriedIdentifier, ...]
    facts_tokens: int
    turns: tuple[Turn, ...]
    turns_tokens: int
    dropped: int = 0
    truncated: bool = False
    version: int = 0
    recall: Recall = Recall()
    recall_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Total tokens of summary, facts, recalled archive and turns in the prompt."""
        return self.summary_tokens + self.facts_tokens + self.turns_tokens + self.recall_tokens
