"""Everything gistbot-specific of scenario 6, in one place (constructors are moving).

``GistbotChannel.replay(conv, budget, folder)`` opens the real runtime (``Runtime.open``
with ``Settings`` built from an explicit mapping: the offline model, a SQLite file in
``folder``, ``CONTEXT_TOKENS`` chosen so that ``Budget.memory_tokens`` (``bot.conversation.budget``)
equals the benchmark budget), records every turn as an adapter would
(``ChatService.receive``, not addressed to the bot, ``sent_at`` = the turn's time in its
session) at channel pace (each message after background compaction is idle), waits for
compaction, and snapshots the database file.

``ask(question)`` builds the prompt a reply would send, on the replayed state: the question
is recorded as the newest user turn, the view is read as ``ReplyJob.gather`` reads it
(``MemoryManager.view(key, budget.memory_tokens, through_seq=<question seq>, recall=True)``)
and rendered by ``bot.conversation.prompts.build_messages``; then the question turn is deleted
again. If anything else changed meanwhile (the question triggered a compaction, the delete did not
apply), the runtime is reopened on a fresh copy of the snapshot, so every question sees the
same state and no question leaks into another. No model call is made for the reply: we
measure the prompt.

``prompts_on_fresh_copies`` serves scenario 5's identifier probe: each question on its own
copy of a live runtime's database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.delivered import answer
from benchmarks.longmem.generate import Conversation, Question
from benchmarks.longmem.methods import fixed
from bot.app import Runtime
from bot.conversation.prompts import build_messages
from bot.errors import ConfigError
from bot.messages import IncomingMessage
from bot.settings import Settings, load_settings
from bot.settings.sections import BudgetSettings
from memory.completion import ChatMessage
from memory.models import ChannelKey, NewTurn

__all__ = ["Embedding", "GistbotChannel", "context_budget", "default_budget",
           "prompts_on_fresh_copies",
           "reply_prompt", "settings_for", "snapshot_sqlite"]

REPLY_TOKENS = 800
ASK_DELAY = 86_400.0  # questions come a day after the last session


def default_budget() -> int:
    """The memory budget of a default deployment: ``CONTEXT_TOKENS − REPLY_TOKENS − fixed``
    (``bot.conversation.budget.Budget.memory_tokens`` with the default settings and system
    prompt)."""
    return context_budget(BudgetSettings().context_tokens)


def context_budget(context_tokens: int) -> int:
    """The memory budget of a deployment with this ``CONTEXT_TOKENS`` and the other
    settings at their defaults."""
    return context_tokens - BudgetSettings().reply_tokens - fixed()


def settings_for(budget: int, db: Path, embedding: Embedding | None = None
                 ) -> tuple[Settings, dict[str, str]]:
    """Settings whose memory budget is ``budget``; gistbot's defaults otherwise, except
    ``SUMMARY_TOKENS`` lowered (in steps of 50) when the default does not validate at a
    small ``CONTEXT_TOKENS``, and semantic recall on ``embedding``'s endpoint when given.
    Returns the settings and the non-default values used."""
    env = {
        "LLM_PROVIDER": "offline",
        "DATABASE_URL": f"sqlite:///{db}",
        "SQLITE_SYNCHRONOUS": "OFF",  # a throwaway file; durability is not measured here
        "CONTEXT_TOKENS": str(budget + REPLY_TOKENS + fixed()),
        "REPLY_TOKENS": str(REPLY_TOKENS),
        "USER_RATE_LIMIT": "0",
        "LOG_LEVEL": "WARNING",
    }
    if embedding is not None:
        env |= {"OPENAI_BASE_URL": embedding.base_url, "EMBEDDING_MODEL": embedding.model}
    summary = 600  # only used if the derived SUMMARY_TOKENS does not validate
    while True:
        try:
            return load_settings(environ=env, env_file=None), env
        except ConfigError:
            if summary <= 50:
                raise
            summary -= 50
            env["SUMMARY_TOKENS"] = str(summary)


@dataclass(frozen=True)
class Embedding:
    """The embedding endpoint of a semantic-recall run (``benchmarks.embedding_server``)."""

    base_url: str
    model: str


def _copy_snapshot(snapshot: Path, db: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(snapshot, db)


@dataclass
class _Open:
    stack: contextlib.AsyncExitStack
    rt: Runtime


class GistbotChannel:
    """One conversation replayed into gistbot at one budget; ``ask`` questions on it."""

    def __init__(self, conv: Conversation, budget: int, folder: Path,
                 embedding: Embedding | None = None) -> None:
        self.conv, self.budget, self.folder = conv, budget, folder
        self.key = ChannelKey("bench", "longmem", conv.id)
        tag = "-semantic" if embedding is not None else ""
        self.db = folder / f"{conv.id}-{budget}{tag}.db"
        self.snapshot = folder / f"{conv.id}-{budget}{tag}.snapshot.db"
        self.settings, self.env = settings_for(budget, self.db, embedding)
        self.view_seconds: list[float] = []
        """Per question: recording it and building its reply's prompt (the reply path)."""
        self.fallbacks = 0
        self.asked_at = conv.turns[-1].sent_at + ASK_DELAY
        self.restores = 0
        self._open: _Open | None = None
        self._baseline: tuple[Any, ...] = ()

    async def _start(self) -> Runtime:
        logging.getLogger("bot.app").setLevel(logging.ERROR)  # "offline model" on every open
        stack = contextlib.AsyncExitStack()
        rt = await stack.enter_async_context(Runtime.open(self.settings))
        self._open = _Open(stack, rt)
        budget = rt.budget.memory_tokens
        if budget != self.budget:
            raise AssertionError(f"memory budget {budget} != {self.budget}")
        return rt

    async def _stop(self) -> None:
        if self._open is not None:
            await self._open.stack.aclose()
            self._open = None

    async def _state(self, rt: Runtime) -> tuple[Any, ...]:
        s = await rt.memory.stats(self.key)
        return (s.turns, s.folded, s.pending, s.compactions)

    @classmethod
    @contextlib.asynccontextmanager
    async def replay(cls, conv: Conversation, budget: int, folder: Path,
                     embedding: Embedding | None = None) -> AsyncIterator[GistbotChannel]:
        """Replay ``conv`` at ``budget``; yield a channel to ask questions on. With
        ``embedding``, every turn is embedded (the indexer idle) before the snapshot."""
        ch = cls(conv, budget, folder, embedding)
        try:
            rt = await ch._start()
            for t in conv.turns:
                await rt.memory.wait_idle()
                await answer(rt, IncomingMessage(
                    key=ch.key, message_id=t.id, author_id=t.speaker_id, author_name=t.speaker,
                    text=t.text, sent_at=t.sent_at, mentions_bot=False))
            await rt.memory.wait_idle()
            if rt.memory.indexer is not None:
                await rt.memory.indexer.wait_idle()
            await ch._stop()
            await asyncio.to_thread(snapshot_sqlite, ch.db, ch.snapshot)
            rt = await ch._start()
            ch._baseline = await ch._state(rt)
            yield ch
        finally:
            await ch._stop()

    async def _restore(self) -> Runtime:
        await self._stop()
        await asyncio.to_thread(_copy_snapshot, self.snapshot, self.db)
        self.restores += 1
        return await self._start()

    async def ask(self, q: Question) -> list[ChatMessage]:
        """The messages a reply to ``q`` would send, on the replayed state (left unchanged)."""
        assert self._open is not None
        rt = self._open.rt
        name, author = self.conv.asker
        message_id = f"ask:{q.id}"
        before = rt.memory.semantic.fallbacks if rt.memory.semantic is not None else 0
        started = time.perf_counter()
        messages = await reply_prompt(rt, IncomingMessage(
            key=self.key, message_id=message_id, author_id=author, author_name=name,
            text=q.question, sent_at=self.asked_at, mentions_bot=True))
        self.view_seconds.append(time.perf_counter() - started)
        if rt.memory.semantic is not None:
            self.fallbacks += rt.memory.semantic.fallbacks - before
        outcome = await rt.memory.delete(self.key, message_id)
        await rt.memory.wait_idle()
        if outcome != "deleted" or await self._state(rt) != self._baseline:
            await self._restore()
        return messages


async def reply_prompt(rt: Runtime, msg: IncomingMessage) -> list[ChatMessage]:
    """Record ``msg`` as the newest turn and return the prompt a reply to it would send:
    recorded as ``ChatService.receive`` records it, the view read and rendered as
    ``ReplyJob.gather`` does (keep them in step)."""
    result = await rt.memory.record(NewTurn(msg.key, msg.message_id, "user", msg.author_id,
                                            msg.author_name, msg.text, 0, msg.sent_at))
    view = await rt.memory.view(msg.key, rt.budget.memory_tokens,
                                through_seq=result.turn.seq, recall=True)
    return build_messages(rt.settings.chat.system_prompt, view)


def snapshot_sqlite(db: Path, dest: Path) -> None:
    """A consistent copy of a SQLite database that may be open elsewhere (backup API)."""
    import sqlite3

    src, out = sqlite3.connect(db), sqlite3.connect(dest)
    try:
        src.backup(out)
    finally:
        out.close()
        src.close()


async def prompts_on_fresh_copies(rt: Runtime, env: Mapping[str, str],
                                  messages: Sequence[IncomingMessage], folder: Path
                                  ) -> list[list[ChatMessage]]:
    """For each of ``messages``: on a fresh copy of ``rt``'s SQLite database (a runtime with the
    same settings ``env``, offline model), the prompt a reply to that turn would send. The
    live runtime is not touched; no turn sees another."""
    db = rt.settings.database.sqlite_path
    assert db is not None, "fresh copies need a SQLite database"
    snap = folder / "probe-snapshot.db"
    await asyncio.to_thread(snapshot_sqlite, db, snap)
    work = folder / "probe.db"
    settings = load_settings(environ={**env, "LLM_PROVIDER": "offline",
                                      "DATABASE_URL": f"sqlite:///{work}"}, env_file=None)
    logging.getLogger("bot.app").setLevel(logging.ERROR)
    out = []
    for msg in messages:
        await asyncio.to_thread(_copy_snapshot, snap, work)
        async with Runtime.open(settings) as copy:
            out.append(await reply_prompt(copy, msg))
    return out
