"""``bot.llm.gate.LLMGate`` in process: slots, replies first, the summary cap, preemption,
and no slot leaked whatever is cancelled. The wire tests are in test_llm_gate_wire.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from bot.llm.gate import LLMGate
from memory.errors import MemoryError_, Preempted

pytestmark = pytest.mark.timeout(20)  # a hang is a failure, soon


async def until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` (another component's state) until it holds; fail if it never does."""
    for _ in range(5000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the condition never held")


class Calls:
    """Model calls that run until the test releases them, in the order they started."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self._release: dict[str, asyncio.Event] = {}

    def call(self, name: str) -> Callable[[], Awaitable[str]]:
        self._release[name] = asyncio.Event()

        async def run() -> str:
            self.started.append(name)
            try:
                await self._release[name].wait()
            except asyncio.CancelledError:
                self.cancelled.append(name)
                raise
            return name

        return run

    def finish(self, name: str) -> None:
        self._release[name].set()


def submit(gate: LLMGate, calls: Calls, purpose: str, name: str) -> asyncio.Task[str]:
    return asyncio.create_task(gate.run(purpose, calls.call(name)))


async def test_at_most_slots_calls_at_once() -> None:
    gate, calls = LLMGate(2), Calls()
    tasks = [submit(gate, calls, "reply", f"r{i}") for i in range(5)]
    await until(lambda: len(calls.started) == 2)
    await asyncio.sleep(0.01)
    assert calls.started == ["r0", "r1"] and gate.waiting == 3
    calls.finish("r0")
    await until(lambda: len(calls.started) == 3)
    assert calls.started[-1] == "r2"  # first come, first served among replies
    for name in ("r1", "r2", "r3", "r4"):
        calls.finish(name)
    assert await asyncio.gather(*tasks) == ["r0", "r1", "r2", "r3", "r4"]
    assert (gate.in_flight, gate.waiting) == (0, 0)


async def test_waiting_replies_go_first_and_pass_each_waiting_summary_once() -> None:
    gate, calls = LLMGate(1), Calls()
    first = submit(gate, calls, "digest", "busy")  # interactive: not preemptible
    await until(lambda: calls.started == ["busy"])
    summaries = [submit(gate, calls, "summary", f"s{i}") for i in range(3)]
    await until(lambda: gate.waiting == 3)
    reply = submit(gate, calls, "reply", "reply")
    digest = submit(gate, calls, "digest", "digest")
    await until(lambda: gate.waiting == 5)
    for name in ("busy", "reply", "digest", "s0", "s1", "s2"):
        calls.finish(name)
    await asyncio.gather(first, reply, digest, *summaries)
    # The reply passes the waiting summaries; the oldest was passed over once, so it goes
    # before the digest that came after it (aging); the digest passes s1 the same way.
    assert calls.started == ["busy", "reply", "s0", "digest", "s1", "s2"]
    assert calls.cancelled == []


async def test_summary_cap_leaves_slots_to_replies() -> None:
    gate, calls = LLMGate(4, summary_slots=2), Calls()
    summaries = [submit(gate, calls, "summary", f"s{i}") for i in range(5)]
    await until(lambda: len(calls.started) == 2)
    await asyncio.sleep(0.01)
    assert calls.started == ["s0", "s1"] and gate.waiting == 3  # two slots stay free
    reply = submit(gate, calls, "reply", "reply")
    await until(lambda: "reply" in calls.started)
    assert calls.cancelled == []  # a free slot: nothing to preempt
    calls.finish("reply")
    await reply
    for i in range(5):
        calls.finish(f"s{i}")
    await asyncio.gather(*summaries)
    assert calls.started == ["s0", "s1", "reply", "s2", "s3", "s4"]


async def test_reply_preempts_the_newest_summary_when_no_slot_is_free() -> None:
    gate, calls = LLMGate(2), Calls()
    old = submit(gate, calls, "summary", "old")
    await until(lambda: calls.started == ["old"])
    new = submit(gate, calls, "summary", "new")
    await until(lambda: calls.started == ["old", "new"])
    reply = submit(gate, calls, "reply", "reply")
    await until(lambda: "reply" in calls.started)
    assert calls.cancelled == ["new"]  # the least work lost
    with pytest.raises(Preempted):
        await new
    assert not old.done()
    calls.finish("reply")
    calls.finish("old")
    assert (await reply, await old) == ("reply", "old")
    assert (gate.in_flight, gate.waiting) == (0, 0)


async def test_one_preemption_per_waiting_reply() -> None:
    gate, calls = LLMGate(3), Calls()
    summaries = [submit(gate, calls, "summary", f"s{i}") for i in range(3)]
    await until(lambda: len(calls.started) == 3)
    replies = [submit(gate, calls, "reply", f"r{i}") for i in range(2)]
    await until(lambda: len(calls.started) == 5)
    assert sorted(calls.cancelled) == ["s1", "s2"]
    results = await asyncio.gather(*summaries[1:], return_exceptions=True)
    assert all(isinstance(r, Preempted) for r in results)
    for name in ("s0", "r0", "r1"):
        calls.finish(name)
    assert await asyncio.gather(summaries[0], *replies) == ["s0", "r0", "r1"]


async def test_streams_and_interactive_calls_are_never_preempted() -> None:
    gate, calls = LLMGate(1), Calls()
    release = asyncio.Event()

    async def stream() -> None:
        async with gate.hold("summary"):  # even a summary, when it streams
            await release.wait()

    streaming = asyncio.create_task(stream())
    await until(lambda: gate.in_flight == 1)
    reply = submit(gate, calls, "reply", "reply")
    await asyncio.sleep(0.02)
    assert calls.started == [] and not streaming.done()
    release.set()
    await streaming
    calls.finish("reply")
    assert await reply == "reply"


async def test_summary_preempted_between_grant_and_start_never_runs() -> None:
    gate, calls = LLMGate(1), Calls()
    async with gate.hold("digest"):
        summary = submit(gate, calls, "summary", "summary")
        await until(lambda: gate.waiting == 1)
    # The slot is now the summary's, but its task has not run yet; a reply arrives.
    async with gate.hold("reply"):
        with pytest.raises(Preempted):
            await summary
    assert calls.started == []
    assert (gate.in_flight, gate.waiting) == (0, 0)


async def test_cancelled_callers_give_their_slots_back() -> None:
    gate, calls = LLMGate(1, summary_slots=1), Calls()
    running = submit(gate, calls, "summary", "running")
    await until(lambda: calls.started == ["running"])
    waiting = [submit(gate, calls, "summary", f"w{i}") for i in range(3)]
    await until(lambda: gate.waiting == 3)
    waiting[0].cancel()
    running.cancel()  # the caller's own cancellation stays a cancellation
    with pytest.raises(asyncio.CancelledError):
        await running
    assert calls.cancelled == ["running"]
    await until(lambda: calls.started == ["running", "w1"])
    calls.finish("w1")
    calls.finish("w2")
    assert await asyncio.gather(*waiting[1:]) == ["w1", "w2"]
    assert waiting[0].cancelled()
    assert (gate.in_flight, gate.waiting) == (0, 0)


async def test_cancelled_waiting_reply_does_not_block_summaries() -> None:
    gate, calls = LLMGate(1), Calls()
    submit(gate, calls, "digest", "busy")
    await until(lambda: calls.started == ["busy"])
    summary = submit(gate, calls, "summary", "summary")
    reply = submit(gate, calls, "reply", "reply")
    await until(lambda: gate.waiting == 2)
    reply.cancel()
    await asyncio.sleep(0)
    calls.finish("busy")
    await until(lambda: "summary" in calls.started)
    calls.finish("summary")
    assert await summary == "summary"
    assert (gate.in_flight, gate.waiting) == (0, 0)


async def test_failures_pass_through_and_free_the_slot() -> None:
    gate = LLMGate(1)

    async def boom() -> str:
        raise RuntimeError("endpoint down")

    for purpose in ("reply", "summary"):
        with pytest.raises(RuntimeError, match="endpoint down"):
            await gate.run(purpose, boom)
    assert gate.in_flight == 0


def test_preempted_is_a_memory_error_and_bad_sizes_are_refused() -> None:
    assert issubclass(Preempted, MemoryError_)  # compaction recognises it without bot/
    with pytest.raises(ValueError, match="at least 1"):
        LLMGate(0)
    with pytest.raises(ValueError, match="at least 1"):
        LLMGate(2, summary_slots=0)
