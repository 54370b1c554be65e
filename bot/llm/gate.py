"""Who may call the model endpoint now: replies first, background summaries capped and
preemptible. ``LLMGate(slots, summary_slots=...)`` sits in front of one endpoint:

- **Slots.** At most ``slots`` calls (``LLM_CONCURRENCY``: the number of requests the
  server runs in parallel) are in flight; the rest wait on futures, costing nothing.
- **Priority.** A free slot goes to the longest-waiting *interactive* call (``reply``,
  ``digest``), and only when none waits to a background ``summary`` or ``embedding``
  batch (which count as summaries below; but see *Aging*).
- **Summary cap.** At most ``summary_slots`` summaries (``SUMMARY_CONCURRENCY``) at once.
- **Preemption.** An interactive call that finds every slot taken while summaries hold
  some cancels the newest of them; the SDK closes its HTTP request (summaries are streamed,
  so llama.cpp and Ollama stop generating) and its caller gets ``memory.errors.Preempted``
  (compaction retries later). Streams (:meth:`LLMGate.hold`) keep their slot until they end.
- **Aging.** A summary made where ``memory.completion.PREEMPTIBLE`` is false (after one
  preemption of the channel's summary) waits in line with the replies, in arrival order,
  so a one-slot server under steady chat still finishes it (docs/decisions/0020); so does
  the oldest waiting summary once a reply takes the slot it waited for (else never run).

Waiting is not part of ``LLM_TIMEOUT`` (``SUMMARY_TIMEOUT`` includes it). ``OfflineLLM`` gates
summaries alike; ``bot.channels.quota`` admits a call on a limited account before it waits here.
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
BACKGROUND = frozenset({"summary", "embedding"})


class _Slot:
    """One call's claim on the endpoint: granted, or waiting on ``granted``."""

    __slots__ = ("aged", "arrived", "granted", "preempted", "preemptible", "summary", "task")

    def __init__(self, purpose: str, *, preemptible: bool, arrived: int = 0) -> None:
        self.arrived = arrived  # the gate's count of requests before this one
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
        self._arrivals = 0

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
        self._arrivals += 1
        slot = _Slot(purpose, preemptible=preemptible, arrived=self._arrivals)
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
            else:
                for waiting in (self._urgent, self._background):
                    if slot in waiting:
                        waiting.remove(slot)
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
        passed = False
        for slot in list(self._urgent):
            if len(self._held) >= self.slots:
                break
            if self._may_start(slot):
                self._urgent.remove(slot)
                self._start(slot)
                passed = passed or not slot.summary
        if passed and self._background:
            self._age_waiting()
            self._dispatch()  # a free slot left (several slots) goes to the line as it is now
            return
        while self._background and self._may_start(self._background[0]):
            self._start(self._background.popleft())

    def _age_waiting(self) -> None:
        """The oldest waiting summary was passed over: it joins the replies' line where its
        arrival puts it, and will not be preempted. One per pass, so a reply waits for at
        most one summary it did not arrive after."""
        slot = self._background.popleft()
        slot.aged, slot.preemptible = True, False
        at = next((i for i, s in enumerate(self._urgent) if s.arrived > slot.arrived),
                  len(self._urgent))
        self._urgent.insert(at, slot)

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
