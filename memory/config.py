"""``MemoryConfig``: the memory layer's tunables, one frozen object shared by its parts.

It is also the ``memory`` section of the bot's settings tree: its fields without
``tunable`` are settings (the variable is the field's name upper-cased, with the
description and checks declared here); ``tunable`` ones are set by code and tests only.
The manager hands the same object to compaction and to the archive, so a default lives in
one place.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memory.view import ViewSplit

__all__ = ["VIEW_TURN_LIMIT", "MemoryConfig", "tunable"]

VIEW_TURN_LIMIT = 400
"""Most unfolded turns a view reads; far more than any budget fits, bounded for cost."""


def tunable(default: Any) -> Any:
    """A field that is not a setting: no variable reads it and it is not shown; code and
    tests set it."""
    return Field(default, exclude=True)


class MemoryConfig(BaseModel):
    """How much memory goes into a prompt, how compaction retries, how long turns are kept.

    Budgets (tokens): ``facts_tokens`` bounds the carried identifiers in a view (or
    ``facts_share`` of it, if more); the newest turns take at most ``recent_share`` of what
    the summary leaves (``memory.view``); recall gets the rest, or at most
    ``recall_tokens`` (0 = off), choosing among ``recall_facts`` facts, ``recall_episodes``
    episodes and ``recall_turns`` stored turns found by search. The window settings choose
    the compaction window (``memory.window.WindowPolicy``, derived by the caller).
    Compaction (seconds): a failure is retried after ``retry_base`` doubled per attempt,
    capped at ``retry_max``; the cross-process lease lives ``lease_ttl`` and is renewed
    every third of it; a process that finds the lease taken looks again after
    ``lease_wait``. Load: ``max_inflight_records`` records wait for the store at once.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", title="Memory")

    facts_tokens: int = Field(default=300, ge=0, description=(
        "Carried identifiers in the prompt, most relevant to the message first (the rest "
        "stay stored)."))
    recall_tokens: int | None = Field(default=None, ge=0, description=(
        "Cap on what a reply recalls by search (older stored messages, long-term facts, "
        "episodes). Unset: whatever the rest of the budget leaves; 0 turns recall off."))
    window_tokens: int = Field(default=0, ge=0, description=(
        "Compact when a channel's unsummarized turns pass this many tokens. 0: derived from "
        "the budget (45% of what the summary leaves of the memory budget)."))
    keep_tokens: int = Field(default=0, ge=0, description=(
        "Fold the oldest turns down to this many tokens (smaller than WINDOW_TOKENS). 0: "
        "derived (10%)."))
    max_history_messages: int | None = Field(default=None, ge=2, description=(
        "The original sliding window: compact past this many unsummarized messages (e.g. "
        "10). Setting it, or KEEP_RECENT_MESSAGES, selects the message window."))
    keep_recent_messages: int | None = Field(default=None, ge=0, description=(
        "With the message window, keep this many messages verbatim (e.g. 4; smaller than "
        "MAX_HISTORY_MESSAGES)."))
    retention_days: float | None = Field(default=None, gt=0, description=(
        "Delete turns that are already summarized after this many days. Unset: keep "
        "forever."))

    recall_facts: int = tunable(8)
    recall_episodes: int = tunable(4)
    recall_turns: int = tunable(40)
    recent_share: float = tunable(0.45)
    facts_share: float = tunable(0.1)
    retry_base: float = tunable(5.0)
    retry_max: float = tunable(600.0)
    lease_ttl: float = tunable(30.0)
    lease_wait: float = tunable(2.0)
    max_inflight_records: int = tunable(256)

    @field_validator("max_history_messages", "keep_recent_messages", "recall_tokens",
                     "retention_days", mode="before")
    @classmethod
    def _blank_is_unset(cls, v: Any) -> Any:
        return None if isinstance(v, str) and not v.strip() else v

    def window_problems(self) -> list[str]:
        """What is inconsistent between the window settings, each with its fix."""
        problems = []
        most, keep = self.max_history_messages, self.keep_recent_messages
        if keep is not None and keep >= (most or 10):
            problems.append(
                f"KEEP_RECENT_MESSAGES ({keep}) must be smaller than "
                f"MAX_HISTORY_MESSAGES ({most or 10}); e.g. 4 and 10")
        if self.window_tokens and self.keep_tokens >= self.window_tokens:
            problems.append(
                f"KEEP_TOKENS ({self.keep_tokens}) must be smaller than WINDOW_TOKENS "
                f"({self.window_tokens})")
        return problems

    @property
    def split(self) -> ViewSplit:
        """How a view divides its budget under this configuration."""
        return ViewSplit(
            recent_share=self.recent_share,
            facts_tokens=self.facts_tokens,
            facts_share=self.facts_share,
            recall_tokens=self.recall_tokens,
        )
