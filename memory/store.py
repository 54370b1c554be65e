"""Store protocols by role: what each caller needs from a backend (SQLite, PostgreSQL).

``MemoryStore`` is what the memory manager reads and commits; ``ArchiveStore`` holds
episodes and long-term facts; ``LeaseStore`` keeps compaction single-flight across
processes; ``PortingStore`` serves ``gistbot copy-db``; ``InspectStore`` the operator's
inspector; ``CatchupStore`` (``memory.catchup_store``) reads turns by time;
``EmbeddingStore`` (``memory.embedding_store``) turn vectors. ``Store`` is their union.

Semantics every backend keeps (``tests/harness/store_contract.py`` runs on both):

* ``record`` is idempotent on ``(key, message_id)`` and durable before it returns; an
  answer (``NewTurn.answers``) is inserted only while the turn it answers is stored.
* ``commit_summary`` is atomic and conditional on the channel's ``version``; it may store
  the folded range as an ``Episode`` (never rewritten) and new ``LongTermFact``s with it.
* Compaction never deletes turns; only ``reset`` and ``purge_folded_before`` do.
* Hot queries (``record``, ``snapshot``, ``pending``) cost the same at 100 or 100,000
  turns; ``search`` and ``search_turns`` rank one channel's archive and turns by full-text
  relevance on ``memory.search_text``'s terms, at a cost that follows the matches, not
  the channel's length. Every turn is indexed in the transaction that writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from memory.catchup_store import CatchupStore
from memory.embedding_store import EmbeddingStore
from memory.history import ChannelOverview, SummaryVersion
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    ChannelStats,
    Episode,
    LongTermFact,
    NewEpisode,
    NewLongTermFact,
    NewTurn,
    Recall,
    RecordResult,
    SummaryState,
    Turn,
)

__all__ = [
    "ArchiveStore",
    "CatchupStore",
    "ChangeOutcome",
    "EmbeddingStore",
    "InspectStore",
    "LeaseStore",
    "Lifecycle",
    "MemoryStore",
    "PortingStore",
    "ResetResult",
    "Store",
]

ChangeOutcome = Literal["updated", "deleted", "folded", "amended", "missing"]
"""Result of an edit, delete or amend: done, already in the summary (left as is), stored
with a folded turn and queued for the next summary (``amend``), or unknown."""


@dataclass(frozen=True, slots=True)
class ResetResult:
    """What ``reset`` deleted, so the command can confirm it."""

    turns: int
    had_summary: bool
    facts: int
    episodes: int = 0
    channel_facts: int = 0


@runtime_checkable
class Lifecycle(Protocol):
    """Opening and closing a backend."""

    async def open(self) -> None:
        """Connect and migrate the schema; raise ``StoreOpenError`` with a fix on failure."""

    async def close(self) -> None:
        """Finish pending writes and close; safe to call twice."""


@runtime_checkable
class MemoryStore(Protocol):
    """What the memory manager needs: turns, the summary state and its atomic commit."""

    async def record(self, turn: NewTurn) -> RecordResult:
        """Store a turn (or return the existing one with the same message id). With
        ``turn.answers``, only while that turn is stored: ``AnsweredTurnGone`` when a reset
        or delete took it, and nothing is written (no seq taken, no channel row made)."""

    async def state(self, key: ChannelKey, *, facts_limit: int = 500) -> SummaryState:
        """The committed summary state; an unknown channel gives an empty state."""

    async def snapshot(
        self, key: ChannelKey, *, limit: int, facts_limit: int = 500, through_seq: int | None = None
    ) -> tuple[SummaryState, list[Turn]]:
        """State plus the newest ``limit`` unfolded turns up to ``through_seq`` (ascending),
        read in one transaction so summary, fold pointer and turns agree."""

    async def pending(self, key: ChannelKey, *, limit: int | None = None) -> list[Turn]:
        """Unfolded turns (``seq > folded_through``), oldest first."""

    async def pending_size(self, key: ChannelKey) -> tuple[int, int]:
        """(count, tokens) of unfolded turns: what the window policy triggers on."""

    async def commit_summary(
        self,
        key: ChannelKey,
        *,
        expected_version: int,
        text: str,
        folded_through: int,
        facts: Sequence[CarriedIdentifier],
        now: float,
        episode: NewEpisode | None = None,
        channel_facts: Sequence[NewLongTermFact] = (),
        amended: Sequence[int] = (),
    ) -> bool:
        """Atomically set summary, fold pointer and facts if ``version`` is unchanged; in
        the same transaction archive ``episode``, insert ``channel_facts`` (marking the
        facts they supersede) and clear the queue mark of the ``amended`` seqs this summary
        folded in. Nothing of it is written when the version moved on."""

    async def edit(self, key: ChannelKey, message_id: str, text: str, tokens: int) -> ChangeOutcome:
        """Replace the text of an unfolded turn (a folded one is left as summarized)."""

    async def amend(self, key: ChannelKey, message_id: str, text: str, tokens: int
                    ) -> ChangeOutcome:
        """Replace a turn's text with itself completed by what arrived for it later (its
        files read). An unfolded turn is edited as by ``edit`` (``updated``); a folded one
        gets the text too, indexed for search, and is queued for the next summary
        (``amended``). Both bump the version, so a compaction that read the turn's old
        text, or the old queue, cannot commit."""

    async def amended(self, key: ChannelKey, *, limit: int = 50) -> list[Turn]:
        """Folded turns amended since they were folded and not yet folded in again,
        oldest first (at most ``limit``)."""

    async def delete(self, key: ChannelKey, message_id: str) -> ChangeOutcome:
        """Remove an unfolded turn (a folded one stays in the summary)."""

    async def reset(self, key: ChannelKey) -> ResetResult:
        """Delete the channel's turns, summary and facts; bump the version."""

    async def stats(self, key: ChannelKey) -> ChannelStats:
        """Counts for the ``/summary`` footer."""

    async def turns(self, key: ChannelKey, *, after_seq: int = 0, limit: int = 1000) -> list[Turn]:
        """All stored turns (folded or not) after ``after_seq``, oldest first (export)."""

    async def turns_with_ids(self, key: ChannelKey, message_ids: Sequence[str]) -> list[Turn]:
        """The channel's stored turns (folded or not) with these platform message ids, by
        seq ascending; unknown ids are skipped (a reply's chain of referenced messages)."""

    async def channels(self) -> list[ChannelKey]:
        """Every channel with stored state."""

    async def newest_message_ids(self, key: ChannelKey, *, limit: int = 20) -> list[str]:
        """Message ids of the channel's newest ``limit`` user turns (folded or not), newest
        seq first: where a backfill after downtime starts (platform ids, never replies)."""

    async def purge_folded_before(self, cutoff: float) -> int:
        """Delete folded turns sent before ``cutoff`` (retention); return how many."""


@runtime_checkable
class ArchiveStore(Protocol):
    """The long-term archive: episodes, long-term facts, and search over them and over
    every stored turn."""

    async def add_fact(self, key: ChannelKey, fact: NewLongTermFact, *, now: float) -> LongTermFact:
        """Store one fact (``/remember``); creates the channel if needed."""

    async def list_facts(
        self, key: ChannelKey, *, include_superseded: bool = True, limit: int = 200
    ) -> list[LongTermFact]:
        """The channel's facts, newest first."""

    async def delete_fact(self, key: ChannelKey, fact_id: int) -> LongTermFact | None:
        """Delete one fact of this channel (``/forget``); None if it has no such fact."""

    async def episodes(self, key: ChannelKey, *, limit: int = 20) -> list[Episode]:
        """The channel's newest episodes, newest first."""

    async def search(
        self,
        key: ChannelKey,
        query: Sequence[str],
        *,
        facts_limit: int = 8,
        episodes_limit: int = 4,
        include_superseded: bool = True,
    ) -> Recall:
        """Facts and episodes of this channel matching any of the ``query`` terms
        (``memory.search_text.query_terms``), most relevant first; current facts before
        superseded ones. No terms, no results."""

    async def search_turns(
        self, key: ChannelKey, query: Sequence[str], *, before_seq: int, limit: int = 40,
        fallback: Sequence[str] | None = None, max_docs: int | None = None,
    ) -> list[Turn]:
        """This channel's stored turns (folded or not) with ``seq < before_seq`` that match any
        of the ``query`` terms (``memory.search_text.query_terms``), best first (BM25; ties:
        newer first). No terms, or none that occurs, no results.

        Turns that match only terms held by more than half the searched turns (in a
        two-person chat, a speaker's name) come after the others, shortest first; then
        turns matching only the ``fallback`` terms (default: ``query``), best first, then
        newest first (``common.turn_tiers``). With ``max_docs``, terms held by more of the
        searched turns are left out of every pass."""

    async def turns_at(self, key: ChannelKey, seqs: Sequence[int]) -> list[Turn]:
        """The channel's stored turns with these seqs, ascending; unknown seqs are skipped."""


@runtime_checkable
class LeaseStore(Protocol):
    """Compaction leases: one compaction per channel at a time, across processes."""

    async def try_lease(self, key: ChannelKey, owner: str, ttl: float) -> bool:
        """Take or renew the channel's compaction lease for ``ttl`` seconds.

        True if ``owner`` now holds it (free, expired, or already ``owner``'s): two
        processes never compact one channel at once, and a dead one blocks it at most ``ttl``.
        """

    async def release_lease(self, key: ChannelKey, owner: str) -> bool:
        """Give the lease back if ``owner`` holds it."""


@runtime_checkable
class PortingStore(Protocol):
    """Copying a whole database (``gistbot copy-db``); not for live traffic."""

    async def import_turns(self, key: ChannelKey, turns: Sequence[Turn]) -> int:
        """Copy turns in with their own seqs (``gistbot copy-db``); existing seqs are kept.

        Idempotent, so an interrupted copy resumes by importing again. Returns how many
        were new. Not for live traffic: it bypasses seq assignment.
        """

    async def import_state(self, state: SummaryState) -> None:
        """Set a channel's summary state exactly (text, version, fold pointer, counters,
        facts), for ``gistbot copy-db``."""

    async def replace_archive(
        self, key: ChannelKey, episodes: Sequence[Episode], facts: Sequence[LongTermFact]
    ) -> None:
        """Set a channel's episodes and long-term facts to copies of these (``copy-db``).

        One transaction; the target assigns new ids, and ``superseded_by`` links are
        re-pointed to the copies. Idempotent, so an interrupted copy can run again.
        """


@runtime_checkable
class InspectStore(Protocol):
    """The operator's inspector: summary history, an operator's summary edit, overviews."""

    async def edit_summary(
        self, key: ChannelKey, *, expected_version: int, text: str, now: float, author: str = ""
    ) -> bool:
        """Replace the summary text if ``version`` is unchanged (the check ``commit_summary``
        makes, so a concurrent compaction is never overwritten); bump the version and record
        the new text in the summary history. The fold pointer and facts stay."""

    async def summary_history_of(self, key: ChannelKey, *, limit: int = 50
                                 ) -> list[SummaryVersion]:
        """The channel's kept summary versions, newest first. ``commit_summary`` and
        ``edit_summary`` add one in their own transaction and keep the newest
        ``summary_history`` (a constructor setting); ``reset`` deletes them."""

    async def channel_overview(self) -> list[ChannelOverview]:
        """Every channel's counts (turns, pending, last activity, oldest pending)."""

    async def replace_history(self, key: ChannelKey, versions: Sequence[SummaryVersion]) -> None:
        """Set the channel's summary history to copies of ``versions``, oldest id first
        (``gistbot copy-db``; the target assigns new ids). Idempotent."""


@runtime_checkable
class Store(
    Lifecycle, MemoryStore, ArchiveStore, LeaseStore, PortingStore, InspectStore, CatchupStore,
    EmbeddingStore, Protocol
):
    """Everything one backend class implements; callers ask for the narrower role they use."""
