"""The memory commands: ``/summary``, ``/remember``, ``/memory``, ``/forget`` and ``/reset``.

A feature of its own, apart from the message path (``bot/conversation/service.py``): they only read
and change memory — no model call of their own (``/summary``'s digest is the memory's, paid by
the caller's and the server's quotas), no rate limit, no owed replies. Adapters reach it as
``ChatService.memory_commands``. ``/remember`` is for anyone; ``/memory`` is answered to the
caller only (the adapters send it ephemerally); ``/forget`` needs the same permission as
``/reset``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.channels.config import ChannelConfig
from bot.channels.quota import Quota
from bot.errors import (
    LLMAuthError,
    LLMBadResponse,
    LLMRateLimited,
    LLMTimeout,
    LLMUnavailable,
    OverQuota,
)
from bot.messages import CommandResult
from bot.wording import plural
from memory.errors import SummaryRejected
from memory.manager import MemoryManager
from memory.models import ChannelKey, ChannelStats, LongTermFact
from memory.recall import episode_spans, fact_line

__all__ = ["MAX_FACT_CHARS", "RECORD_OFF", "MemoryCommands", "digest_failure", "footer"]

RECORD_OFF = "Recording is off in this channel (record off): I store nothing said here."
MAX_FACT_CHARS = 1000  # a pinned fact is a statement, not a document
MEMORY_LIST_LIMIT = 50


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def footer(stats: ChannelStats) -> str:
    """The counts line under ``/summary``."""
    return (
        f"Remembering {plural(stats.turns, 'message')} ({stats.folded} summarized, "
        f"{stats.pending} verbatim) · {plural(stats.facts, 'kept identifier')} · last compaction: "
        f"{_when(stats.last_compacted_at)}"
    )


def _listed(fact: LongTermFact) -> str:
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


class MemoryCommands:
    """``/summary``, ``/remember``, ``/memory``, ``/forget``, ``/reset`` over ``memory``;
    ``channels`` tells ``/summary`` when the channel records nothing."""

    def __init__(self, memory: MemoryManager, channels: ChannelConfig, quota: Quota) -> None:
        self.memory, self.channels, self.quota = memory, channels, quota

    async def summary(self, key: ChannelKey, author_id: str = "") -> CommandResult:
        """``/summary``: the conversation so far (stored state unchanged) and counts; with
        ``record off`` it says that nothing said here is stored. Paid by the caller and
        their server; over a quota it says so (privately, like a reply's notice)."""
        with self.quota.paying(key, "summary", author_id):
            try:
                return await self._summary(key)
            except OverQuota as e:
                return CommandResult(e.user_message, ok=False)

    async def _summary(self, key: ChannelKey) -> CommandResult:
        off = (await self.channels.get(key)).record == "off"
        digest = await self.memory.digest(key)
        if digest.empty:
            return CommandResult(RECORD_OFF if off else
                                 "Nothing to summarize yet: I have no messages from this channel.")
        note = ""
        if not digest.fresh:
            note = f"\n_({digest_failure(digest.error)}; this is the stored summary.)_"
        earlier = ""
        if digest.episodes:
            spans = episode_spans(list(reversed(digest.episodes)))
            earlier = ("\n\nEarlier stretches, folded into this summary and still "
                       f"searchable: {spans} (UTC)")
        head = f"_{RECORD_OFF} What follows is from before it was turned off._\n\n" if off else ""
        return CommandResult(
            f"{head}{digest.text.strip()}{note}{earlier}\n\n— {footer(digest.stats)}"
        )

    async def remember(self, key: ChannelKey, text: str, *, author: str = "") -> CommandResult:
        """``/remember <text>``: pin a long-term fact (anyone may)."""
        text = text.strip()
        if not text:
            return CommandResult("Tell me what to remember: /remember <text>.", ok=False)
        if len(text) > MAX_FACT_CHARS:
            return CommandResult(
                f"That is too long to pin as a fact (at most {MAX_FACT_CHARS:,} characters).",
                ok=False,
            )
        fact = await self.memory.remember(key, text, author=author)
        return CommandResult(f"Remembered as fact #{fact.id}: {fact.text}")

    async def memory_list(self, key: ChannelKey) -> CommandResult:
        """``/memory``: the channel's long-term facts (the adapter shows it to the caller only)."""
        facts = await self.memory.facts(key, limit=MEMORY_LIST_LIMIT + 1)
        if not facts:
            return CommandResult(
                "I have no long-term facts for this channel yet. Pin one with /remember <text>."
            )
        lines = [_listed(f) for f in facts[:MEMORY_LIST_LIMIT]]
        more = (
            f"\n(only the newest {MEMORY_LIST_LIMIT} are shown)"
            if len(facts) > MEMORY_LIST_LIMIT
            else ""
        )
        return CommandResult(
            "Long-term facts of this channel (newest first; /forget <id> removes one):\n"
            + "\n".join(lines)
            + more
        )

    async def forget(
        self, key: ChannelKey, ref: str, *, allowed: bool, refusal: str | None = None
    ) -> CommandResult:
        """``/forget <fact id or text>``: remove one fact; same permission as ``/reset``."""
        if not allowed:
            return CommandResult(
                refusal or "You are not allowed to change this channel's memory.", ok=False
            )
        if not ref.strip():
            return CommandResult("Which fact? /forget <id or text> (see /memory).", ok=False)
        out = await self.memory.forget(key, ref)
        if out is None:
            return CommandResult(f"I have no fact matching {ref.strip()!r} here.", ok=False)
        if isinstance(out, list):
            ids = ", ".join(f"#{f.id}" for f in out[:10])
            return CommandResult(
                f"Several facts match ({ids}); say which one by id: /forget <id>.", ok=False
            )
        return CommandResult(f"Forgot fact #{out.id}: {out.text}")

    async def reset(
        self, key: ChannelKey, *, allowed: bool, refusal: str | None = None
    ) -> CommandResult:
        """``/reset``: forget the channel if the caller may; say what was deleted.

        ``refusal`` lets the adapter say who may reset on its platform.
        """
        if not allowed:
            return CommandResult(
                refusal or "You are not allowed to reset this channel's memory.", ok=False
            )
        result = await self.memory.reset(key)
        if not (
            result.turns
            or result.had_summary
            or result.facts
            or result.episodes
            or result.channel_facts
        ):
            return CommandResult("There was nothing to forget: I had no memory of this channel.")
        parts = [plural(result.turns, "message")]
        if result.had_summary:
            parts.append("the summary")
        if result.facts:
            parts.append(plural(result.facts, "kept identifier"))
        if result.episodes:
            parts.append(plural(result.episodes, "archived episode"))
        if result.channel_facts:
            parts.append(plural(result.channel_facts, "long-term fact"))
        return CommandResult(f"Done: I forgot {', '.join(parts)} from this channel.")
