"""What ``/catchup`` and scheduled digests need from a backend: turns by time, a person's
last message, digest schedules, and slot claims that make a digest post exactly once.

Two role protocols, implemented by both stores (``memory/stores/*/digests.py`` hold the
SQL) and pinned by ``tests/harness/store_contract.py``:

* ``CatchupStore`` reads a channel's stored turns (folded or not) by the time they were
  sent, so a catch-up over a period never depends on what compaction did.
* ``DigestStore`` keeps one schedule per channel and the *slot claims*: a row per
  (channel, slot time) inserted by whoever posts that slot. Two replicas, or a restarted
  process, racing for one slot insert the same primary key; only one wins. A claim that
  was taken but never finished (its holder died before posting) expires after its ttl and
  may be taken again, so a crash costs a late post, never a lost or a doubled one once
  ``finish_digest_slot`` ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from memory.models import ChannelKey, Turn

__all__ = ["CatchupStore", "DigestSchedule", "DigestSlot", "DigestStore", "SlotState"]

SlotState = Literal["claimed", "posted", "skipped"]


@dataclass(frozen=True, slots=True)
class DigestSchedule:
    """When a channel's digest is posted: ``every`` day or week (``weekday`` 0 = Monday,
    -1 for daily) at ``minute`` minutes after local midnight in the IANA zone ``tz``,
    in the channel or (``in_thread``) in a thread under a heading message.

    ``created_at`` bounds the slots: a slot before the schedule existed is never posted.
    """

    key: ChannelKey
    every: Literal["daily", "weekly"]
    weekday: int
    minute: int
    tz: str
    created_at: float
    created_by: str = ""
    in_thread: bool = False  # post a heading in the channel and the digest in its thread


@dataclass(frozen=True, slots=True)
class DigestSlot:
    """One claimed slot: who took it and what became of it."""

    key: ChannelKey
    slot_at: float
    owner: str
    state: SlotState


@runtime_checkable
class CatchupStore(Protocol):
    """Turns by time, for ``/catchup`` and digests."""

    async def turns_between(
        self, key: ChannelKey, start: float, end: float, *, limit: int = 50_000
    ) -> list[Turn]:
        """Stored turns (folded or not) with ``start <= sent_at < end``, oldest first."""

    async def last_turn_by(self, key: ChannelKey, author_id: str, before: float) -> Turn | None:
        """The newest user turn of ``author_id`` sent before ``before``; None if none."""


@runtime_checkable
class DigestStore(Protocol):
    """Digest schedules and exactly-once slot claims."""

    async def set_digest_schedule(self, schedule: DigestSchedule) -> None:
        """Create or replace the channel's schedule."""

    async def delete_digest_schedule(self, key: ChannelKey) -> bool:
        """Remove the channel's schedule; False if it had none."""

    async def digest_schedule(self, key: ChannelKey) -> DigestSchedule | None:
        """The channel's schedule, if any."""

    async def digest_schedules(self) -> list[DigestSchedule]:
        """Every schedule."""

    async def claim_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, ttl: float
    ) -> bool:
        """True if ``owner`` now holds the slot: nobody had claimed it, or a claim that was
        never finished expired (``ttl`` seconds after it was taken)."""

    async def finish_digest_slot(
        self, key: ChannelKey, slot_at: float, owner: str, state: SlotState
    ) -> bool:
        """Mark a slot ``owner`` holds as ``posted`` or ``skipped`` (final: never reclaimed)."""

    async def digest_slots(self, key: ChannelKey, *, limit: int = 50) -> list[DigestSlot]:
        """The channel's slot claims, newest first."""
