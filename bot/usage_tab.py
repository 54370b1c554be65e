"""Which request used how many tokens: a tab that model calls made inside a block add to.

A quota charges a reply what the provider reported for it. Replies may be streamed, and a
stream's usage arrives in its last chunk, deep inside ``OpenAILLM``; rather than thread a
callback through every call, the caller opens a tab (a context variable, so concurrent
replies in one process never mix) and ``OpenAILLM`` notes each call's reported usage on
whatever tab is open, besides its ``UsageMeter`` record. The offline model costs nothing
and notes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["UsageTab", "note_usage", "open_tab"]


class UsageTab:
    """The provider-reported tokens of the calls made while the tab was open."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.calls = 0

    @property
    def total(self) -> int:
        """Prompt plus completion tokens of every call counted."""
        return self.prompt_tokens + self.completion_tokens


_TAB: ContextVar[UsageTab | None] = ContextVar("gistbot_usage_tab", default=None)


@contextlib.contextmanager
def open_tab(tab: UsageTab | None = None) -> Iterator[UsageTab]:
    """Count into ``tab`` (a new one by default) every model call made inside the block,
    in this task and in the tasks it starts."""
    tab = tab or UsageTab()
    token = _TAB.set(tab)
    try:
        yield tab
    finally:
        _TAB.reset(token)


def note_usage(prompt_tokens: int, completion_tokens: int) -> None:
    """Add one call's reported usage to the open tab, if there is one."""
    tab = _TAB.get()
    if tab is not None:
        tab.prompt_tokens += prompt_tokens
        tab.completion_tokens += completion_tokens
        tab.calls += 1
