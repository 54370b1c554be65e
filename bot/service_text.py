"""The sentences ``ChatService`` builds around command results: the ``/summary`` counts
footer, a ``/memory`` line, and what a failed digest says happened (kept apart so the
service module stays about what happens, not how it is worded)."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.errors import LLMAuthError, LLMBadResponse, LLMRateLimited, LLMTimeout, LLMUnavailable
from memory.errors import SummaryRejected
from memory.models import ChannelStats, LongTermFact
from memory.recall import fact_line

__all__ = ["digest_failure", "footer", "listed"]


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def footer(stats: ChannelStats) -> str:
    """The counts line under ``/summary``."""
    return (
        f"Remembering {stats.turns} messages ({stats.folded} summarized, {stats.pending} "
        f"verbatim) · {stats.facts} carried facts · last compaction: "
        f"{_when(stats.last_compacted_at)}"
    )


def listed(fact: LongTermFact) -> str:
    line = fact_line(fact)
    extra = [x for x in ("pinned" if fact.pinned else "", fact.author) if x]
    return f"{line} ({', '.join(extra)})" if extra else line


def digest_failure(error: BaseException | None) -> str:
    """What ``/summary`` says when the summary model failed: what actually happened."""
    if isinstance(error, TimeoutError | LLMTimeout):
        return "The summary model did not answer in time"
    if isinstance(error, SummaryRejected | LLMBadResponse):
        return "The summary model's answer was unusable"
    if isinstance(error, LLMUnavailable | LLMRateLimited):
        return "The summary model could not be reached"
    if isinstance(error, LLMAuthError):
        return "The summary model refused the request (check the API key)"
    return "The summary model failed"
