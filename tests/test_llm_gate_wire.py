"""Replies first on a shared endpoint, and a cap on concurrent summaries, with the real
``openai`` SDK against the loopback fake (tests/fakes/openai_server.py) — one-slot, like a
llama.cpp server on a small machine, where the fake serves one request at a time and
queues the rest. Also the two settings and their wiring."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.app import make_llm
from bot.errors import ConfigError
from bot.llm.client import OpenAILLM, UsageMeter
from bot.llm.offline import OfflineLLM
from bot.settings import load_settings
from memory.completion import ChatMessage
from memory.errors import Preempted
from memory.models import ChannelKey, Turn
from memory.summarizer import build_summary_request
from memory.tokens import TokenCounter
from tests.fakes.openai_server import FakeOpenAI, Text, default_responder, is_summary_request

pytestmark = pytest.mark.timeout(60)  # a hang is a failure, soon

REPLY: list[ChatMessage] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hello?"},
]
SUMMARY: list[ChatMessage] = [
    {"role": "system", "content": "Summarize the conversation."},
    {"role": "user", "content": "Token limit: 50\n<<<NEW MESSAGES>>>\n[Alice]: ORD-7 is late"},
]


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK reads OPENAI_* variables; the developer's must not leak into tests."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


async def until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` (another component's state) until it holds; fail if it never does."""
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition never held")


def slow_summaries(seconds: float) -> Callable[[dict[str, Any]], float]:
    """A model that takes ``seconds`` for a summary and no time for anything else."""
    return lambda body: seconds if is_summary_request(body) else 0.0


@pytest.fixture
async def llms() -> AsyncIterator[Callable[..., OpenAILLM]]:
    made: list[OpenAILLM] = []

    def make(fake: FakeOpenAI, **options: Any) -> OpenAILLM:
        options = {"model": "gpt-test", "max_retries": 0, "timeout": 30.0} | options
        made.append(OpenAILLM(api_key=None, base_url=fake.base_url, **options))
        return made[-1]

    yield make
    for llm in made:
        await llm.aclose()


async def test_reply_preempts_a_slow_summary_on_a_one_slot_endpoint(
    llms: Callable[..., OpenAILLM],
) -> None:
    async with FakeOpenAI(
        responder=default_responder, latency=slow_summaries(2.0), max_concurrency=1
    ) as fake:
        llm = llms(fake, concurrency=1)
        summary = asyncio.create_task(llm.complete(SUMMARY, max_tokens=99, purpose="summary"))
        await until(lambda: len(fake.active) == 1)  # the summary is being generated
        started = time.monotonic()
        reply = await llm.complete(REPLY, max_tokens=20, purpose="reply")
        took = time.monotonic() - started
        assert reply.text == "You said: Hello?"
        assert took < 1.5, f"the reply waited {took:.2f}s behind a 2s summary"
        with pytest.raises(Preempted):
            await summary
        await until(lambda: len(fake.disconnected) == 1)  # the request was closed
        assert is_summary_request(fake.disconnected[0].json or {})
        assert [is_summary_request(r.json or {}) for r in fake.served] == [True, False]


async def test_a_reply_is_served_before_five_waiting_summaries(
    llms: Callable[..., OpenAILLM],
) -> None:
    async with FakeOpenAI(responder=default_responder, max_concurrency=1) as fake:
        llm = llms(fake, concurrency=1)
        # A streamed reply holds the only slot (until its stream ends, it is not preempted)
        fake.push(Text("one two three", chunk_delay=0.2))
        stream = llm.stream(REPLY, max_tokens=20, purpose="reply")
        first = await anext(stream)
        summaries = [
            asyncio.create_task(llm.complete(SUMMARY, max_tokens=99, purpose="summary"))
            for _ in range(5)
        ]
        await asyncio.sleep(0.1)  # the summaries are queued before the reply arrives
        reply = asyncio.create_task(llm.complete(REPLY, max_tokens=20, purpose="reply"))
        rest = [piece async for piece in stream]
        assert (first + "".join(rest)).split() == ["one", "two", "three"]
        assert (await reply).text == "You said: Hello?"
        assert all(s.text == "- Alice: ORD-7 is late" for s in await asyncio.gather(*summaries))
        kinds = ["summary" if is_summary_request(r.json or {}) else "reply" for r in fake.served]
        assert kinds == ["reply", "reply", *["summary"] * 5]
        assert fake.disconnected == []


async def test_never_more_summaries_in_flight_than_the_cap(
    llms: Callable[..., OpenAILLM],
) -> None:
    async with FakeOpenAI(responder=default_responder, latency=slow_summaries(0.3)) as fake:
        llm = llms(fake, concurrency=32, summary_concurrency=8)
        loop = asyncio.get_running_loop()
        lag, done = 0.0, asyncio.Event()

        async def watch() -> None:  # the event loop stays responsive meanwhile
            nonlocal lag
            while not done.is_set():
                before = loop.time()
                await asyncio.sleep(0.01)
                lag = max(lag, loop.time() - before - 0.01)

        watcher = asyncio.create_task(watch())
        answers = await asyncio.gather(
            *(llm.complete(SUMMARY, max_tokens=99, purpose="summary") for _ in range(50))
        )
        done.set()
        await watcher
        assert len(answers) == 50 and len(fake.served) == 50
        assert 1 < fake.peak_summaries <= 8, f"{fake.peak_summaries} summaries at once"
        # Replies still get the other slots while summaries wait for theirs.
        fake_reply = await llm.complete(REPLY, max_tokens=20, purpose="reply")
        assert fake_reply.text == "You said: Hello?"
        assert lag < 1.0


async def test_reply_timeout_counts_from_its_slot_not_its_wait(
    llms: Callable[..., OpenAILLM],
) -> None:
    async with FakeOpenAI(responder=default_responder, max_concurrency=1) as fake:
        llm = llms(fake, concurrency=1, timeout=1.0)
        # A slow streamed reply holds the slot for ~1.6 s, chunks 0.4 s apart (within the
        # 1 s read timeout); a second reply waits for it, longer than its own timeout.
        fake.push(Text("a b c d", chunk_delay=0.4))

        async def read_stream() -> str:
            return "".join([p async for p in llm.stream(REPLY, max_tokens=20, purpose="reply")])

        streaming = asyncio.create_task(read_stream())
        await until(lambda: len(fake.active) == 1)
        started = time.monotonic()
        reply = await llm.complete(REPLY, max_tokens=20, purpose="reply")
        waited = time.monotonic() - started
        assert reply.text == "You said: Hello?"
        assert waited > 1.0  # longer than LLM_TIMEOUT in all, and still answered
        assert (await streaming).split() == ["a", "b", "c", "d"]


async def test_summary_waits_for_a_streaming_reply_to_end(
    llms: Callable[..., OpenAILLM],
) -> None:
    async with FakeOpenAI(responder=default_responder) as fake:
        llm = llms(fake, concurrency=1)
        fake.push(Text("still talking"))
        stream = llm.stream(REPLY, max_tokens=20, purpose="reply")
        await anext(stream)
        summary = asyncio.create_task(llm.complete(SUMMARY, max_tokens=99, purpose="summary"))
        await asyncio.sleep(0.2)
        assert len(fake.chat_requests) == 1 and not summary.done()
        await stream.aclose()  # a stream given up early gives its slot back too
        assert (await summary).text == "- Alice: ORD-7 is late"


async def test_offline_summaries_are_capped_per_loop_turn() -> None:
    tokenizer = TokenCounter("gpt-4o-mini")
    key = ChannelKey("console", "local", "c")
    text = "Order ORD-1042 ships Friday; Bob decided to refund it."
    turns = [Turn(key, 1, "m1", "user", "bob", "Bob", text, tokenizer.count(text), 0.0)]
    messages = build_summary_request("", [], turns, max_tokens=60)
    llm = OfflineLLM(tokenizer, summary_concurrency=3)
    ticks = itertools.count()
    tick = 0
    seen: list[int] = []
    real = llm._complete

    def spy(*args: Any) -> Any:
        seen.append(tick)
        return real(*args)

    llm._complete = spy  # type: ignore[method-assign]
    done = asyncio.Event()

    async def count_loop_turns() -> None:
        nonlocal tick
        while not done.is_set():
            tick = next(ticks)
            await asyncio.sleep(0)

    counter = asyncio.create_task(count_loop_turns())
    await asyncio.sleep(0)
    summaries = await asyncio.gather(
        *(llm.complete(messages, max_tokens=100, purpose="summary") for _ in range(20))
    )
    done.set()
    await counter
    assert len({s.text for s in summaries}) == 1 and "ORD-1042" in summaries[0].text
    per_turn = [len(list(group)) for _, group in itertools.groupby(seen)]
    assert sum(per_turn) == 20 and max(per_turn) <= 3, per_turn


async def test_make_llm_passes_both_settings() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "LLM_CONCURRENCY": "1"}
    online = make_llm(
        load_settings(env | {"SUMMARY_CONCURRENCY": "3"}), TokenCounter("m"), UsageMeter()
    )
    assert isinstance(online, OpenAILLM)
    assert (online.gate.slots, online.gate.summary_slots) == (1, 3)
    await online.aclose()
    offline = make_llm(load_settings({"SUMMARY_CONCURRENCY": "5"}), TokenCounter("m"), UsageMeter())
    assert isinstance(offline, OfflineLLM) and offline.gate.summary_slots == 5
    defaults = load_settings({})
    assert (defaults.llm.llm_concurrency, defaults.llm.summary_concurrency) == (4, 8)


@pytest.mark.parametrize("variable", ["LLM_CONCURRENCY", "SUMMARY_CONCURRENCY"])
@pytest.mark.parametrize("value", ["0", "-2"])
def test_concurrency_settings_must_be_at_least_one(variable: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({variable: value})
    assert f"{variable}: must be at least 1, not {value}" in str(info.value)
    assert load_settings({variable: "1"}).flat()[variable] == 1


def test_concurrency_settings_must_be_integers() -> None:
    with pytest.raises(ConfigError, match="LLM_CONCURRENCY"):
        load_settings({"LLM_CONCURRENCY": "many"})


async def test_summary_timeout_counts_from_its_slot_and_is_enforced_per_request(
    llms: Callable[..., OpenAILLM],
) -> None:
    """``SUMMARY_TIMEOUT`` is the request's own: a summary that waited behind a reply longer
    than it still gets its answer, and one whose model is slower than it times out."""
    from bot.errors import LLMTimeout

    async with FakeOpenAI(
        responder=default_responder, latency=slow_summaries(0.0), max_concurrency=1
    ) as fake:
        llm = llms(fake, concurrency=1, summary_timeout=1.0)
        fake.push(Text("a b c d", chunk_delay=0.4))  # a reply holding the slot ~1.6 s

        async def read_stream() -> str:
            return "".join([p async for p in llm.stream(REPLY, max_tokens=20, purpose="reply")])

        streaming = asyncio.create_task(read_stream())
        await until(lambda: len(fake.active) == 1)
        started = time.monotonic()
        answer = await llm.complete(SUMMARY, max_tokens=99, purpose="summary")
        assert time.monotonic() - started > 1.0 and answer.text == "- Alice: ORD-7 is late"
        await streaming
    async with FakeOpenAI(responder=default_responder, latency=slow_summaries(3.0)) as fake:
        llm = llms(fake, concurrency=1, summary_timeout=0.5)
        with pytest.raises(LLMTimeout):
            await llm.complete(SUMMARY, max_tokens=99, purpose="summary")
