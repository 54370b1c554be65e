"""Summary history and channel overviews: what the operator's inspector reads.

Every committed summary (a compaction's or an operator's edit) is kept as a
``SummaryVersion`` in the store, written in the same transaction as the commit itself, so
the history never shows a version that was not installed nor misses one that was. Each
channel keeps its newest ``SUMMARY_HISTORY`` versions (the store prunes older ones in that
same transaction). ``ChannelOverview`` is one row of the channel list and feeds the
compaction-lag gauges; it is read in one query for all channels.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

from memory.models import ChannelKey

__all__ = ["DEFAULT_SUMMARY_HISTORY", "ChannelOverview", "SummarySource", "SummaryVersion",
           "summary_diff"]

DEFAULT_SUMMARY_HISTORY = 20
SummarySource = Literal["compaction", "edit"]


@dataclass(frozen=True, slots=True)
class SummaryVersion:
    """One committed summary: its text, the channel version it installed, and the range of
    turns that commit folded (``first_seq > last_seq`` when it folded none, as an edit)."""

    id: int
    key: ChannelKey
    version: int
    text: str
    first_seq: int
    last_seq: int
    committed_at: float
    source: SummarySource
    author: str = ""

    @property
    def folded(self) -> int:
        """How many seqs this commit folded."""
        return max(0, self.last_seq - self.first_seq + 1)


@dataclass(frozen=True, slots=True)
class ChannelOverview:
    """A channel's counts for the channel list and the compaction-lag metrics.

    ``oldest_pending_at`` is when the oldest unsummarized turn was sent (None: none).
    """

    key: ChannelKey
    turns: int
    pending: int
    last_activity: float | None
    oldest_pending_at: float | None
    last_compacted_at: float | None
    version: int


def summary_diff(old: str, new: str) -> list[tuple[str, str]]:
    """A line diff of two summaries as (``"+"``, ``"-"`` or ``" "``, line) pairs."""
    out: list[tuple[str, str]] = []
    for line in difflib.ndiff(old.splitlines(), new.splitlines()):
        tag = line[:1]
        if tag in "+- ":
            out.append((tag, line[2:]))
    return out
