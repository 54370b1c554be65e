"""Who may call the model endpoint now: replies first, background summaries capped and
preemptible.

``LLMGate(slots, summary_slots=...)`` sits in front of one endpoint (one ``OpenAILLM``):

- **Slots.** At most ``slots`` calls (``LLM_CONCURRENCY``) are in flight at once; the rest
  wait, on futures, so waiting costs the event loop nothing. Set it to the number of
  requests the server runs in parallel (llama.cpp ``--parallel``, Ollama
  ``OLLAMA_NUM_PARALLEL``): a server that queues requests itself hides them from the gate.
  A hosted API takes more (say 32); preemption only happens when every slot is taken.
- **Priority.** A free slot goes to the longest-waiting *interactive* call (``reply``,
  ``digest``: someone is waiting for it) and only when none waits to the longest-waiting
  background ``summary``.
- **Summary cap.** At most ``summary_slots`` summaries (``SUMMARY_CONCURRENCY``) hold a
  slot at once, so a burst of compactions never floods the endpoint or the event loop.
- **Preemption.** An interactive call that finds no free slot while summaries hold some
  cancels the newest of them (one per waiting interactive call) and takes the slot it
  frees. The summary's request task is cancelled, so the SDK closes the HTTP request;
  ``OpenAILLM`` streams summary requests because llama.cpp and Ollama stop generating
  only when writing a streamed chunk fails (a non-streamed request runs to its end and
  keeps the server's slot). Its caller gets ``memory.errors.Preempted`` (``memory/``
  recognises it without importing ``bot/``; compaction retries later). Only calls made
  with :meth:`LLMGate.run` for ``summary`` are preemptible; streams (:meth:`LLMGate.hold`)
  keep their slot until they end.
- **Aging.** A summary made where ``memory.completion.PREEMPTIBLE`` is false (compaction
  clears it once a channel's summary was preempted) is neither preemptible nor queued
  behind the replies: it waits in line with them, in arrival order, so a one-slot server
  under steady chat still finishes a summary, and a reply waits at most one summary.

Time spent waiting here is not part of a request's timeout (``LLM_TIMEOUT``): the SDK's
timeout starts with the request, which starts once the slot is held. (``SUMMARY_TIMEOUT``,
which ``memory.summarizer`` puts around the whole call, does include the wait; a summary
that times out while waiting never reached the endpoint, and compaction retries it.)

``OfflineLLM`` uses a gate of ``summary_slots`` slots for its summaries alone, so at most
that many CPU-bound extractive summaries run per event-loop turn. ``bot.quota`` gives each
account with a daily token limit a gate of one slot, taken before the endpoint's: one
uncounted call per account at a time, with the same priority and preemption.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from memory.completion import PREEMPTIBLE
from memory.errors import Preempted

__all__ = ["BACKGROUND", "INTERACTIVE", "LLMGate"]

T = TypeVar("T")
INTERACTIVE = frozenset({"reply", "digest"})
BACKGROUND = frozenset({"summary"})


class _Slot:
    """One call's claim on the endpoint: granted, or waiting on ``granted``."""

    __slots__ = ("aged", "granted", "preempted", "preemptible", "summary", "task")

    def __init__(self, purpose: str, *, preemptible: bool) -> None:
        self.summary = purpose in BACKGROUND
        self.aged = self.summary and not PREEMPTIBLE.get()  # waits in line with replies
        self.preemptible = preemptible and self.summary and not self.aged
        self.preempted = False
        self.task: asyncio.Future[Any] | None = None  # the request, once it runs
        self.granted: asyncio.Future[None] | None = None  # set while waiting


class LLMGate:
    """At most ``slots`` model calls at once, interactive before background, at most
    ``summary_slots`` summaries, and interactive calls preempt summaries (module doc)."""

    def __init__(self, slots: int, *, summary_slots: int | None = None) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        if summary_slots is not None and summary_slots < 1:
            raise ValueError("summary_slots must be at least 1")
        self.slots = slots
        self.summary_slots = summary_slots or slots
        self._held: dict[_Slot, None] = {}  # in the order they were granted
        self._summaries = 0  # held by summaries
        self._preempting = 0  # preempted slots not yet given back
        self._urgent: deque[_Slot] = deque()
        self._background: deque[_Slot] = deque()

    @property
    def in_flight(self) -> int:
        """Calls holding a slot now."""
        return len(self._held)

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot now."""
        return len(self._urgent) + len(self._background)

    async def run(self, purpose: str, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()`` once a slot is held. A ``summary`` may be preempted: its call is
        cancelled and ``Preempted`` raised; cancelling the caller cancels the call as usual."""
        slot = await self._acquire(purpose, preemptible=True)
        try:
            if not slot.preemptible:
                return await call()
            if slot.preempted:  # between being granted and running
                raise Preempted("a reply took this summary's slot before it started")
            # Its own task, so preemption cancels the request and not the caller.
            task = asyncio.ensure_future(call())
            slot.task = task
            try:
                return await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                mine = current is None or current.cancelling() == 0
                if slot.preempted and task.cancelled() and mine:
                    raise Preempted("a reply took this summary's slot; retry later") from None
                raise
        finally:
            self._release(slot)

    @contextlib.asynccontextmanager
    async def hold(self, purpose: str) -> AsyncIterator[None]:
        """Hold a slot for the body (a stream, say); never preempted."""
        slot = await self._acquire(purpose, preemptible=False)
        try:
            yield
        finally:
            self._release(slot)

    # ------------------------------------------------------------------ internals

    async def _acquire(self, purpose: str, *, preemptible: bool) -> _Slot:
        slot = _Slot(purpose, preemptible=preemptible)
        queue = self._background if slot.summary and not slot.aged else self._urgent
        if not queue and self._may_start(slot):
            self._grant(slot)
            return slot
        slot.granted = asyncio.get_running_loop().create_future()
        queue.append(slot)
        if not slot.summary:
            self._preempt()
        try:
            await slot.granted
        except asyncio.CancelledError:
            if slot in self._held:  # granted, then cancelled before it could run
                self._release(slot)
            elif slot in queue:
                queue.remove(slot)
            raise
        return slot

    def _may_start(self, slot: _Slot) -> bool:
        if len(self._held) >= self.slots:
            return False
        if not slot.summary:
            return True
        return (slot.aged or not self._urgent) and self._summaries < self.summary_slots

    def _grant(self, slot: _Slot) -> None:
        self._held[slot] = None
        self._summaries += slot.summary

    def _release(self, slot: _Slot) -> None:
        if slot not in self._held:
            return
        del self._held[slot]
        self._summaries -= slot.summary
        self._preempting -= slot.preempted
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand free slots to waiters: interactive (and aged summaries) in arrival order,
        skipping an aged summary over the cap, then summaries under the cap."""
        for slot in list(self._urgent):
            if len(self._held) >= self.slots:
                return
            if self._may_start(slot):
                self._urgent.remove(slot)
                self._start(slot)
        while self._background and self._may_start(self._background[0]):
            self._start(self._background.popleft())

    def _start(self, slot: _Slot) -> None:
        assert slot.granted is not None
        if slot.granted.done():  # its caller was cancelled while waiting
            return
        self._grant(slot)
        slot.granted.set_result(None)

    def _preempt(self) -> None:
        """Cancel the newest summaries, one per waiting interactive call not yet covered."""
        wanted = sum(not s.summary for s in self._urgent) - self._preempting
        for slot in reversed(self._held):
            if wanted <= 0:
                return
            if slot.preemptible and not slot.preempted:
                slot.preempted = True
                self._preempting += 1
                wanted -= 1
                if slot.task is not None:
                    slot.task.cancel()
