"""What ``/catchup`` and scheduled digests read from the memory store: turns by the time
they were sent and a person's last message (``memory/stores/*/catchup.py`` hold the SQL;
``tests/harness/catchup_contract.py`` pins it on both backends).

A channel's stored turns (folded or not) are read by time, so a catch-up over a period
never depends on what compaction did.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from memory.models import ChannelKey, Turn

__all__ = ["CatchupStore"]


@runtime_checkable
class CatchupStore(Protocol):
    """Turns by time, for ``/catchup`` and digests."""

    async def turns_between(
        self, key: ChannelKey, start: float, end: float, *, limit: int = 50_000
    ) -> list[Turn]:
        """Stored turns (folded or not) with ``start <= sent_at < end``, oldest first."""

    async def last_turn_by(self, key: ChannelKey, author_id: str, before: float) -> Turn | None:
        """The newest user turn of ``author_id`` sent before ``before``; None if none."""
