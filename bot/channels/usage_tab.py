"""Who pays for a model call, and what the provider said it used: the metering half of the
LLM gateway.

Every call to the model endpoint (``OpenAILLM.complete`` and ``stream``) goes through
:func:`metered` or :func:`metered_hold`. They ask the *payer* open in the caller's context
(a context variable, so concurrent replies in one process never mix, and tasks a caller
starts inherit it) to admit the call, given its largest cost (``bot.llm.cost``): the payer
reserves that much or refuses the call before it starts (``bot.errors.OverQuota``), and
settles it afterwards with the usage the provider reported. The payer is
``bot.channels.quota``'s ``Bill``: a reply, ``/summary``, ``/catchup``, a digest or a
background summary opens one with :func:`paying` where it knows whose call it is; a call
made with none open (``gistbot doctor``'s probe, the console) is not metered.

The reported usage reaches the payer through a tab: ``OpenAILLM`` notes each call's usage
on the tab open in its context (a stream's, which arrives in its last chunk, on the tab
its hold yielded: an async generator does not own a context), besides its ``UsageMeter``
record. The offline model costs nothing and notes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import Protocol, TypeVar

__all__ = [
    "Cost",
    "Payer",
    "UsageTab",
    "current_payer",
    "metered",
    "metered_hold",
    "note_usage",
    "open_tab",
    "paying",
]

T = TypeVar("T")
Cost = Callable[[], int]
"""A call's largest cost in tokens, worked out only when a limit needs it."""


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

    def add(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Count one call's reported usage."""
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.calls += 1


class Payer(Protocol):
    """Admits model calls for someone and charges them (``bot.channels.quota.Bill``)."""

    async def run(self, purpose: str, call: Callable[[], Awaitable[T]], *, cost: Cost) -> T:
        """``await call()`` if ``cost()`` tokens may be spent (else raise), charging what it
        reported."""
        ...

    def hold(self, purpose: str, *, cost: Cost) -> AbstractAsyncContextManager[UsageTab]:
        """The same around a body (a stream), which notes its usage on the tab yielded."""
        ...


_TAB: ContextVar[UsageTab | None] = ContextVar("gistbot_usage_tab", default=None)
_PAYER: ContextVar[Payer | None] = ContextVar("gistbot_payer", default=None)


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
        tab.add(prompt_tokens, completion_tokens)


@contextlib.contextmanager
def paying(payer: Payer | None) -> Iterator[None]:
    """Model calls made inside the block (and in tasks started there) are ``payer``'s;
    None: nobody's (not metered)."""
    token = _PAYER.set(payer)
    try:
        yield
    finally:
        _PAYER.reset(token)


def current_payer() -> Payer | None:
    """The payer open here, if any."""
    return _PAYER.get()


async def metered(purpose: str, call: Callable[[], Awaitable[T]], *, cost: Cost) -> T:
    """``await call()``, which may spend up to ``cost()`` tokens, admitted and charged by
    the open payer (directly when none is)."""
    payer = _PAYER.get()
    if payer is None:
        return await call()
    return await payer.run(purpose, call, cost=cost)


@contextlib.asynccontextmanager
async def metered_hold(purpose: str, *, cost: Cost) -> AsyncIterator[UsageTab | None]:
    """:func:`metered` around a body (a stream's whole life), which notes its usage on the
    tab yielded (None: no payer; note it on the open tab as usual)."""
    payer = _PAYER.get()
    if payer is None:
        yield None
        return
    async with payer.hold(purpose, cost=cost) as tab:
        yield tab
