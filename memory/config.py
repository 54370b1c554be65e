"""``MemoryConfig``: the memory layer's tunables, one frozen object shared by its parts.

``bot.app`` fills it from the validated settings; tests build it explicitly. The manager
hands the same object to compaction and to the archive, so a default lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.view import ViewSplit

__all__ = ["VIEW_TURN_LIMIT", "MemoryConfig"]

VIEW_TURN_LIMIT = 400
"""Most unfolded turns a view reads; far more than any budget fits, bounded for cost."""


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """How much memory goes into a prompt, how compaction retries, how long turns are kept.

    Budgets (tokens):
      ``summary_tokens`` bounds the ``/summary`` digest; ``facts_tokens`` the carried
      identifiers in a view (or ``facts_share`` of it, if more); the newest turns take at
      most ``recent_share`` of what the summary leaves (``memory.view``); recall gets the
      rest, or at most ``recall_tokens`` (0 = off), choosing among ``recall_facts`` facts,
      ``recall_episodes`` episodes and ``recall_turns`` stored turns found by search.
    Compaction (seconds):
      a failure is retried after ``retry_base`` doubled per attempt, capped at
      ``retry_max``; the cross-process lease lives ``lease_ttl`` and is renewed every third
      of it, so a dead holder blocks a channel no longer; a process that finds the lease
      taken looks again after ``lease_wait``.
    Load:
      ``max_inflight_records`` records wait for the store at once; a burst beyond that
      parks on a semaphore instead of crowding the event loop's ready queue (256 still
      fill a group commit).
    Retention:
      ``retention_days`` deletes folded turns and episodes older than that; None keeps all.
    """

    summary_tokens: int = 600
    facts_tokens: int = 300
    recall_tokens: int | None = 0
    recall_facts: int = 8
    recall_episodes: int = 4
    recall_turns: int = 40
    recent_share: float = 0.45
    facts_share: float = 0.1
    retry_base: float = 5.0
    retry_max: float = 600.0
    lease_ttl: float = 30.0
    lease_wait: float = 2.0
    max_inflight_records: int = 256
    retention_days: float | None = None

    @property
    def split(self) -> ViewSplit:
        """How a view divides its budget under this configuration."""
        return ViewSplit(
            recent_share=self.recent_share,
            facts_tokens=self.facts_tokens,
            facts_share=self.facts_share,
            recall_tokens=self.recall_tokens,
        )
