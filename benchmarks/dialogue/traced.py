"""Scenario 7's gistbot side: scenario 6's replayed channel, with recall's candidates seen.

``TracedChannel`` is ``benchmarks.longmem.gistbot_side.GistbotChannel`` whose runtime's
archive reports, for each question, the candidate turns of the turn search in the order
the ranking left them (``Archive._recall_turns``' first result): what ``Score.add`` needs
to tell a missing turn never found from one found and not shown.
"""

from __future__ import annotations

from typing import Any

from benchmarks.longmem.generate import Question
from benchmarks.longmem.gistbot_side import GistbotChannel
from bot.app import Runtime
from memory.completion import ChatMessage
from memory.models import Turn

__all__ = ["TracedChannel"]


class TracedChannel(GistbotChannel):
    """A replayed channel that keeps the last question's ranked recall candidates."""

    ranked: list[str]
    """Message ids of the last question's candidates, best first."""

    async def _start(self) -> Runtime:
        rt = await super()._start()
        archive = rt.memory._archive
        inner = archive._recall_turns

        async def traced(*args: Any, **kwargs: Any) -> tuple[list[Turn], list[Turn]]:
            hits, nearby = await inner(*args, **kwargs)
            self.ranked = [t.message_id for t in hits]
            return hits, nearby

        archive._recall_turns = traced  # type: ignore[method-assign]
        return rt

    async def ask(self, q: Question) -> list[ChatMessage]:
        """As ``GistbotChannel.ask``; ``ranked`` holds this question's candidates after."""
        self.ranked = []
        return await super().ask(q)
