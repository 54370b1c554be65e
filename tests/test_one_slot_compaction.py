"""A slow model on a one-slot server still compacts, and its abandoned work stops.

The loopback fake (tests/fakes/openai_server.py) plays a llama.cpp server with one slot
(``max_concurrency=1``) that generates an abandoned non-streamed request to its end
(``finish_abandoned``) and stops a streamed one when its client goes away. The real
``Runtime`` talks to it through the ``openai`` SDK with ``LLM_CONCURRENCY=1``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.llm.client import OpenAILLM
from bot.llm.gate import LLMGate
from memory.errors import Preempted
from tests.fakes.openai_server import FakeOpenAI, default_responder, is_summary_request
from tests.harness.chat import ask
from tests.harness.service import msg, runtime

pytestmark = pytest.mark.timeout(90)

SUMMARY_SECONDS = 1.5  # longer than LLM_TIMEOUT: an abandoned summary would time a reply out
SUMMARY = [
    {"role": "system", "content": "Summarize the conversation."},
    {"role": "user", "content": "Token limit: 50\n<<<NEW MESSAGES>>>\n[Alice]: ORD-7 is late"},
]


AUTHORS = ("Alice", "Bob", "Chen", "Dana")


def slow_summaries(body: dict[str, Any]) -> float:
    return SUMMARY_SECONDS if is_summary_request(body) else 0.05


async def until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` (another component's state) until it holds; fail if it never does."""
    for _ in range(4000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition never held")


async def test_a_preempted_summary_stops_generating_on_the_server() -> None:
    """The summary request is streamed, so preempting it ends the server's work at once:
    the reply gets the slot, nothing runs on for the abandoned request, and the error
    says how far the summary got."""
    async with FakeOpenAI(responder=default_responder, latency=slow_summaries,
                          max_concurrency=1, finish_abandoned=True) as fake:
        llm = OpenAILLM(api_key=None, base_url=fake.base_url, model="gpt-test",
                        max_retries=0, timeout=1.0, concurrency=1)
        try:
            summary = asyncio.create_task(
                llm.complete(SUMMARY, max_tokens=99, purpose="summary"))  # type: ignore[arg-type]
            await until(lambda: len(fake.active) == 1)
            await asyncio.sleep(0.2)
            reply = await llm.complete(
                [{"role": "user", "content": "Hello?"}], max_tokens=20, purpose="reply")
            assert reply.text == "You said: Hello?"  # within its 1 s timeout
            with pytest.raises(Preempted) as caught:
                await summary
        finally:
            await llm.aclose()
    assert fake.served[0].json is not None and fake.served[0].json.get("stream") is True
    assert fake.abandoned == []  # nothing generated on for a client that left
    assert caught.value.elapsed is not None and caught.value.elapsed >= 0.2
    assert caught.value.received == 0
    assert "after" in caught.value.progress()


async def test_compaction_commits_under_steady_chat_and_no_reply_times_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Every gap between replies is shorter than a summary, so a summary that could always
    be preempted would never finish; after one preemption it waits in line with the
    replies instead and runs to its end. Replies wait for it at the gate, whose wait is
    not part of their timeout, so none times out."""
    caplog.set_level(logging.INFO, logger="memory.compaction")
    async with FakeOpenAI(responder=default_responder, latency=slow_summaries,
                          max_concurrency=1, finish_abandoned=True, strict=False) as fake:
        async with runtime(tmp_path, fake, LLM_CONCURRENCY="1", LLM_TIMEOUT="1.0",
                           MAX_HISTORY_MESSAGES="6", KEEP_RECENT_MESSAGES="2") as rt:
            chat: list[asyncio.Task[Any]] = []
            for i in range(50):
                text = f"@gistbot note {i}: order ORD-{100 + i} ships on day {i}"
                who = AUTHORS[i % len(AUTHORS)]  # each under the replies-a-minute limit
                chat.append(asyncio.create_task(
                    ask(rt, msg(i, text, author=who, mention=True))))
                await asyncio.sleep(0.15)  # a reply every 0.15 s: never a 1.5 s gap
            replies = await asyncio.gather(*chat)
            committed = rt.memory.compactions
            errors = [r for r in rt.meter.records if not r.ok]
    assert committed >= 1, "no compaction committed under steady chat"
    assert not [e for e in errors if e.purpose == "reply"], errors
    assert all(r is not None and "You said:" in r.text for r in replies)
    assert fake.abandoned == []
    preempted = [r.getMessage() for r in caplog.records if "preempted by a reply" in r.getMessage()]
    assert preempted, "a preemption was not logged"
    assert "test:w1:c1" in preempted[0]  # the channel
    assert "after" in preempted[0] and "runs to its end" in preempted[0]



async def test_a_summary_passed_over_while_waiting_runs_before_later_replies() -> None:
    """Replies always queued at a one-slot gate: a summary that only ever waited (never
    ran, so never preempted) used to start after the last of them, so under steady chat
    no compaction ever began. Passed over once, it joins the replies' line where its
    arrival puts it: after the reply that came before it, before the one after it."""
    gate = LLMGate(1)
    order: list[str] = []
    release = {name: asyncio.Event() for name in ("r0", "r1", "s", "r2")}

    async def call(purpose: str, name: str) -> None:
        async def work() -> None:
            order.append(name)
            await release[name].wait()
        await gate.run(purpose, work)

    r0 = asyncio.create_task(call("reply", "r0"))
    await until(lambda: order == ["r0"])
    r1 = asyncio.create_task(call("reply", "r1"))
    await until(lambda: gate.waiting == 1)
    s = asyncio.create_task(call("summary", "s"))
    await until(lambda: gate.waiting == 2)
    r2 = asyncio.create_task(call("reply", "r2"))
    await until(lambda: gate.waiting == 3)
    for name in ("r0", "r1", "s", "r2"):
        release[name].set()
    await asyncio.gather(r0, r1, s, r2)
    assert order == ["r0", "r1", "s", "r2"]
