"""gistbot as a benchmark memory: the real ``Runtime`` (settings, SQLite store,
``MemoryManager``, ``Summarizer``, ``ChatService``, ``OpenAILLM`` on the real ``openai`` SDK),
driven the way an adapter drives it.

``pace="idle"`` waits for background compaction to finish before each new message: a
channel that talks slower than its summaries take (every human-paced channel), which also
makes token counts reproducible. ``pace=<seconds>`` sends messages at a fixed gap instead,
whatever compaction is doing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import Config
from benchmarks.conversation import Row, message
from benchmarks.delivered import answer
from bot.app import Runtime
from bot.settings import load_settings
from memory.models import ChannelKey

__all__ = ["GistbotMemory", "gistbot_env"]

KEY = ChannelKey("bench", "team", "general")


def gistbot_env(cfg: Config, *, base_url: str, model: str, db: Path,
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Settings for one benchmark run (never the developer's environment or ``.env``)."""
    env = {
        "OPENAI_BASE_URL": base_url,
        "MODEL_NAME": model,
        "DATABASE_URL": f"sqlite:///{db}",
        "CONTEXT_TOKENS": str(cfg.context_tokens),
        "REPLY_TOKENS": str(cfg.reply_tokens),
        "SUMMARY_TOKENS": str(cfg.summary_tokens),
        "LLM_MAX_RETRIES": "0",
        # The replay runs hours of conversation in minutes: no per-user reply limit.
        "USER_RATE_LIMIT": "0",
        "LOG_LEVEL": "WARNING",
    }
    if cfg.endpoint and os.environ.get("OPENAI_API_KEY"):
        env["OPENAI_API_KEY"] = os.environ["OPENAI_API_KEY"]
    return env | dict(extra or {})


class GistbotMemory:
    """A ``BenchMemory`` over a running gistbot ``Runtime``."""

    def __init__(self, rt: Runtime, *, name: str, model: str, pace: str | float = "idle"
                 ) -> None:
        self.rt, self.name, self.model, self.pace = rt, name, model, pace
        self.failures = 0
        self.env: dict[str, str] = {}

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, cfg: Config, *, base_url: str, name: str = "gistbot",
                   model: str = "gpt-4o-bench-gistbot", pace: str | float = "idle",
                   extra: Mapping[str, str] | None = None) -> AsyncIterator[GistbotMemory]:
        """A fresh database in a temporary folder; everything closed on exit."""
        with tempfile.TemporaryDirectory(prefix="gistbot-bench-") as tmp:
            env = gistbot_env(cfg, base_url=base_url, model=model, db=Path(tmp) / "bench.db",
                              extra=extra)
            async with Runtime.open(load_settings(environ=env, env_file=None)) as rt:
                mem = cls(rt, name=name, model=model, pace=pace)
                mem.env = env
                yield mem

    async def ready(self) -> None:
        """Channel pace: wait for idle compaction, or a fixed gap (see the module docstring)."""
        if self.pace == "idle":
            await self.rt.memory.wait_idle()
        elif isinstance(self.pace, float) and self.pace > 0:
            await asyncio.sleep(self.pace)

    async def observe(self, row: Row) -> None:
        """Record a message that does not mention the bot."""
        await answer(self.rt, message(KEY, row, mention=False))

    async def reply(self, row: Row) -> str:
        """Record a mention and return the bot's answer."""
        reply = await answer(self.rt, message(KEY, row, mention=True))
        if reply is None or reply.failed:
            self.failures += 1
            return "" if reply is None else reply.text
        return reply.text

    async def fresh_probe_prompts(self, rows: Sequence[Row]) -> list[str]:
        """Each probe on its own fresh copy of the channel's state: the prompt a reply to
        it would send (no model call; this runtime is left as it is)."""
        from benchmarks.longmem.gistbot_side import prompts_on_fresh_copies

        msgs = [message(KEY, row, mention=True) for row in rows]
        with tempfile.TemporaryDirectory(prefix="gistbot-probe-") as tmp:
            prompts = await prompts_on_fresh_copies(self.rt, self.env, msgs, Path(tmp))
        return ["\n".join(str(m["content"]) for m in p) for p in prompts]

    async def settle(self) -> None:
        """Let background compaction finish."""
        await self.rt.memory.wait_idle()

    async def _archive(self) -> tuple[str, str]:
        """(long-term facts, episodes) as text; empty when this gistbot has no archive."""
        store: Any = self.rt.store
        if not hasattr(store, "list_facts"):
            return "", ""
        facts = await store.list_facts(KEY, limit=1_000_000)
        episodes = await store.episodes(KEY, limit=1_000_000)
        return "\n".join(f.text for f in facts), "\n".join(e.text for e in episodes)

    async def remembered(self) -> str:
        """Summary, carried facts, the archive (long-term facts, episodes), unfolded turns."""
        b = await self.breakdown()
        return "\n".join(b[k] for k in ("summary", "facts", "longterm", "episodes", "turns"))

    async def breakdown(self) -> dict[str, str]:
        """Where the memory lives: summary, carried facts (all stored / in the prompt), the
        archive, unfolded turns, and what a reply prompt would hold."""
        store = self.rt.store
        state = await store.state(KEY, facts_limit=1_000_000)
        view = await self.rt.memory.view(KEY, self.rt.budget.memory_tokens)
        turns = await store.pending(KEY)
        longterm, episodes = await self._archive()
        return {
            "summary": state.text,
            "facts": "\n".join(f"{f.value} — {f.context}" for f in state.facts),
            "longterm": longterm,
            "episodes": episodes,
            "turns": "\n".join(t.text for t in turns),
            "prompt": "\n".join([view.summary, *(f"{f.value} — {f.context}" for f in view.facts),
                                 *(t.text for t in view.turns)]),
            "facts_stored": str(len(state.facts)),
            "facts_in_prompt": str(len(view.facts)),
            "compactions": str(self.rt.memory.compactions),
            "compaction_failures": str(self.rt.memory.compaction_failures),
        }

    async def aclose(self) -> None:
        """Nothing to do: ``open`` closes the runtime."""
