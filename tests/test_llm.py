"""``bot.llm.client`` against the real ``openai`` SDK on the wire (tests/fakes/openai_server.py).

Every OpenAILLM test goes through the SDK's HTTP client, retries and SSE parsing; only the
server is fake. OfflineLLM is tested directly (it has no network by design).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.errors import (
    ContextLengthExceeded,
    LLMAuthError,
    LLMBadResponse,
    LLMError,
    LLMInputRejected,
    LLMRateLimited,
    LLMTimeout,
    LLMUnavailable,
    ModelNotServed,
)
from bot.llm.client import LLM, Completion, OpenAILLM, Usage, UsageMeter
from bot.llm.offline import OfflineLLM
from bot.llm.thinking import ThinkFilter, strip_think
from memory.completion import ChatMessage, SummaryModel
from memory.tokens import TokenCounter
from tests.fakes.openai_server import (
    EmptyChoices,
    Error,
    FakeOpenAI,
    Hang,
    Malformed,
    Text,
    context_length_error,
    default_responder,
    is_summary_request,
    rate_limited,
)

MESSAGES: list[ChatMessage] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hello?"},
]
MakeLLM = Callable[..., OpenAILLM]
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK reads OPENAI_* variables; the developer's must not leak into tests."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def make_llm(fake: FakeOpenAI) -> AsyncIterator[MakeLLM]:
    made: list[OpenAILLM] = []

    def make(**overrides: Any) -> OpenAILLM:
        options: dict[str, Any] = {"api_key": "sk-test", "base_url": fake.base_url}
        options |= {"model": "gpt-test", "max_retries": 0, "timeout": 10.0} | overrides
        made.append(OpenAILLM(**options))
        return made[-1]

    yield make
    for llm in made:
        await llm.aclose()


async def ask(llm: LLM, mode: str, purpose: str = "reply") -> str:
    """The answer via ``complete`` or via ``stream``, so one test covers both paths."""
    if mode == "complete":
        return (await llm.complete(MESSAGES, max_tokens=64, purpose=purpose)).text
    return "".join([p async for p in llm.stream(MESSAGES, max_tokens=64, purpose=purpose)])


both = pytest.mark.parametrize("mode", ["complete", "stream"])


# --- happy paths ---------------------------------------------------------------------


async def test_complete_returns_text_and_records_usage(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    meter = UsageMeter()
    llm = make_llm(meter=meter)
    fake.push("Hi there!")
    done = await llm.complete(MESSAGES, max_tokens=64, purpose="reply")
    # The fake counts len // 4 + 1 per message: 5 + 2 prompt, 3 completion.
    assert done == Completion("Hi there!", Usage(7, 3), "gpt-test")
    assert done.usage.total == 10
    [request] = fake.chat_requests
    assert request.json == {"model": "gpt-test", "messages": MESSAGES, "max_tokens": 64}
    assert request.headers["Authorization"] == "Bearer sk-test"
    reply = meter.totals()["reply"]
    assert (reply.calls, reply.errors, reply.prompt_tokens, reply.completion_tokens) == (1, 0, 7, 3)
    assert meter.records[-1].latency > 0


async def test_stream_yields_deltas_and_records_usage(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    meter = UsageMeter()
    llm = make_llm(meter=meter)
    fake.push("One two three four")
    pieces = [p async for p in llm.stream(MESSAGES, max_tokens=64, purpose="reply")]
    assert len(pieces) == 4
    assert "".join(pieces) == "One two three four"
    body = fake.chat_requests[0].json or {}
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert meter.totals()["reply"].completion_tokens == 5


async def test_messages_skip_the_sdk_transform(
    fake: FakeOpenAI, make_llm: MakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK walks ``create(messages=...)`` key by key against every message type (~0.4
    ms a message on the event loop); ours go on the wire as they are, all of them, in
    order, for a plain and a streamed call alike."""
    from openai.resources.chat.completions import completions

    walked: list[object] = []
    transform = completions.async_maybe_transform

    async def spy(data: Any, expected_type: object) -> Any:
        walked.append(data.get("messages"))
        return await transform(data, expected_type)

    monkeypatch.setattr(completions, "async_maybe_transform", spy)
    many: list[ChatMessage] = [MESSAGES[0], *({"role": "user", "content": f"m{i}"}
                                              for i in range(30))]
    llm = make_llm()
    fake.push("Hi!")
    fake.push("Hi again")
    await llm.complete(many, max_tokens=64, purpose="reply")
    assert "".join([p async for p in llm.stream(many, max_tokens=64, purpose="reply")])
    assert walked == [[], []]  # the SDK saw no message to walk
    assert [(r.json or {})["messages"] for r in fake.chat_requests] == [many, many]


@pytest.mark.parametrize(
    ("purpose", "model"),
    [("reply", "gpt-test"), ("summary", "gpt-test-mini"), ("digest", "gpt-test-mini")],
)
@both
async def test_purpose_routes_to_model(
    fake: FakeOpenAI, make_llm: MakeLLM, mode: str, purpose: str, model: str
) -> None:
    llm = make_llm(summary_model="gpt-test-mini")
    fake.push("ok")
    assert await ask(llm, mode, purpose) == "ok"
    assert (fake.chat_requests[0].json or {})["model"] == model


async def test_summary_model_defaults_to_model(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.push("ok")
    await make_llm().complete(MESSAGES, max_tokens=8, purpose="summary")
    assert (fake.chat_requests[0].json or {})["model"] == "gpt-test"


async def test_unknown_purpose_is_a_programming_error(make_llm: MakeLLM) -> None:
    with pytest.raises(ValueError, match="purpose"):
        await make_llm().complete(MESSAGES, max_tokens=8, purpose="chat")


async def test_switches_to_max_completion_tokens_when_rejected(
    fake: FakeOpenAI, make_llm: MakeLLM
) -> None:
    message = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead."
    )
    body = {"message": message, "type": "invalid_request_error", "param": "max_tokens"}
    fake.push(Error(400, {"error": body | {"code": "unsupported_parameter"}}), "ok", "again")
    llm = make_llm()
    assert (await llm.complete(MESSAGES, max_tokens=32, purpose="reply")).text == "ok"
    assert (await llm.complete(MESSAGES, max_tokens=32, purpose="reply")).text == "again"
    first, second, third = (r.json or {} for r in fake.chat_requests)
    assert first["max_tokens"] == 32 and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == 32 and "max_tokens" not in second
    assert third["max_completion_tokens"] == 32  # remembered


async def test_probe_lists_models_and_times_a_tiny_completion(
    fake: FakeOpenAI, make_llm: MakeLLM
) -> None:
    fake.push("OK")
    described = await make_llm(summary_model="gpt-test-mini").probe()
    assert "2 models" in described
    assert re.search(r"a tiny completion took \d+\.\d\d s$", described), described
    [chat] = fake.chat_requests
    assert chat.json is not None and chat.json["model"] == "gpt-test"
    with pytest.raises(ModelNotServed, match="MODEL_NAME=gpt-other; it serves gpt-test"):
        await make_llm(model="gpt-other").probe()
    assert len(fake.chat_requests) == 1  # a model it does not serve is not asked


# --- retries (the SDK's) and their limits ----------------------------------------------


async def test_429_waits_for_retry_after_then_succeeds(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.push(rate_limited("1"), "finally")
    done = await make_llm(max_retries=2).complete(MESSAGES, max_tokens=8, purpose="reply")
    assert done.text == "finally"
    first, second = fake.chat_requests
    assert second.at - first.at >= 0.9
    assert second.headers["x-stainless-retry-count"] == "1"


async def test_429_until_retries_run_out_is_rate_limited(
    fake: FakeOpenAI, make_llm: MakeLLM
) -> None:
    fake.push(*[rate_limited("0.05")] * 3)
    with pytest.raises(LLMRateLimited) as caught:
        await make_llm(max_retries=2).complete(MESSAGES, max_tokens=8, purpose="reply")
    assert caught.value.retry_after == pytest.approx(0.05)
    assert len(fake.chat_requests) == 3


async def test_500_three_times_is_unavailable(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    meter = UsageMeter()
    # retry-after-ms keeps the test fast (20 ms, not the default 0.5 s + 1 s backoff).
    boom = Error(
        500, {"error": {"message": "boom", "type": "server_error"}}, {"retry-after-ms": "20"}
    )
    fake.push(boom, boom, boom)
    with pytest.raises(LLMUnavailable):
        await make_llm(max_retries=2, meter=meter).complete(MESSAGES, max_tokens=8, purpose="reply")
    assert len(fake.chat_requests) == 3
    assert meter.totals()["reply"].errors == 1


async def test_hung_request_times_out(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.push(Hang(30))
    started = time.monotonic()
    with pytest.raises(LLMTimeout):
        await make_llm(timeout=0.5).complete(MESSAGES, max_tokens=8, purpose="reply")
    assert 0.45 <= time.monotonic() - started < 5
    assert len(fake.chat_requests) == 1


async def test_connection_refused_is_unavailable(make_llm: MakeLLM) -> None:
    async with FakeOpenAI() as gone:
        url = gone.base_url
    with pytest.raises(LLMUnavailable):
        await make_llm(base_url=url).complete(MESSAGES, max_tokens=8, purpose="reply")


# --- bad answers -----------------------------------------------------------------------

NULL_CONTENT = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None}}],
    }
)


@both
@pytest.mark.parametrize(
    "step",
    [Malformed(), EmptyChoices(), Text("<think>ran out of tokens while thi")],
    ids=["malformed-json", "empty-choices", "only-reasoning"],
)
async def test_unusable_answers_are_bad_responses(
    fake: FakeOpenAI, make_llm: MakeLLM, mode: str, step: Malformed | EmptyChoices | Text
) -> None:
    fake.push(step)
    with pytest.raises(LLMBadResponse):
        await ask(make_llm(), mode)


async def test_null_content_is_bad_response(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.push(Malformed(NULL_CONTENT))  # well-formed JSON, but no text
    with pytest.raises(LLMBadResponse):
        await ask(make_llm(), "complete")


@both
async def test_openai_context_length_error(fake: FakeOpenAI, make_llm: MakeLLM, mode: str) -> None:
    fake.push(context_length_error())
    with pytest.raises(ContextLengthExceeded):
        await ask(make_llm(), mode)


@pytest.mark.parametrize(
    "body",
    [
        {  # vLLM
            "object": "error",
            "type": "BadRequestError",
            "code": 400,
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens (4000 in the messages, 1000 in the completion). Please "
            "reduce the length of the messages or completion.",
        },
        {  # llama.cpp server
            "error": {
                "code": 400,
                "type": "exceed_context_size_error",
                "message": "the request exceeds the available context size, try increasing it",
            }
        },
        {"error": {"message": "input length exceeds the context length", "type": "api_error"}},
        {"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}},
    ],
    ids=["vllm", "llama.cpp", "ollama", "anthropic-compatible"],
)
async def test_other_servers_context_length_phrasings(
    fake: FakeOpenAI, make_llm: MakeLLM, body: dict[str, Any]
) -> None:
    fake.push(Error(400, body))
    with pytest.raises(ContextLengthExceeded):
        await ask(make_llm(), "complete")


async def test_other_400_is_a_rejected_input(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.push(Error(400, {"error": {"message": "Invalid value for 'temperature'."}}))
    with pytest.raises(LLMError) as caught:
        await ask(make_llm(), "complete")
    assert type(caught.value) is LLMInputRejected  # the caller may retry without its parts


@both
@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors(fake: FakeOpenAI, make_llm: MakeLLM, mode: str, status: int) -> None:
    body = {"message": "Incorrect API key provided: sk-test.", "code": "invalid_api_key"}
    fake.push(Error(status, {"error": body}))
    with pytest.raises(LLMAuthError) as caught:
        await ask(make_llm(max_retries=2), mode)
    assert "sk-" not in caught.value.user_message
    assert len(fake.chat_requests) == 1  # 401/403 are not retried


# --- reasoning blocks ------------------------------------------------------------------


async def test_think_block_removed_from_complete(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.push("<think>The user greets me.</think>\n\nHello!")
    assert await ask(make_llm(), "complete") == "Hello!"


async def test_think_block_removed_from_stream_across_chunks(
    fake: FakeOpenAI, make_llm: MakeLLM
) -> None:
    fake.push(
        Text(
            "",
            chunks=[
                "<th",
                "ink>sec",
                "ret</thi",
                "nk>\n\nVis",
                "ible <thinking>",
                "x",
                "</thinking>end",
            ],
        )
    )
    pieces = [p async for p in make_llm().stream(MESSAGES, max_tokens=64, purpose="reply")]
    assert "".join(pieces) == "Visible end"
    assert not any("sec" in p or "<" in p for p in pieces)


SAMPLES = {
    "<think>a</think>\n\nHello": "Hello",
    "Hi <THINKING>x</thinking>there": "Hi there",
    "<think>never closed": "",
    "Use the <think> tag": "Use the <think> tag",
    "reasoning without opener</think>\nAnswer": "Answer",
    "plain text": "plain text",
}


@pytest.mark.parametrize(("raw", "clean"), SAMPLES.items())
def test_strip_think(raw: str, clean: str) -> None:
    assert strip_think(raw) == clean


@pytest.mark.parametrize("raw", [k for k in SAMPLES if "opener" not in k])
def test_think_filter_matches_strip_think_for_every_split(raw: str) -> None:
    for i, j in itertools.combinations(range(len(raw) + 1), 2):
        f = ThinkFilter()
        out = f.feed(raw[:i]) + f.feed(raw[i:j]) + f.feed(raw[j:]) + f.flush()
        assert out.strip() == strip_think(raw), (i, j)


# --- OfflineLLM ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer() -> TokenCounter:
    return TokenCounter("gpt-4o")


def test_implementations_satisfy_the_protocols(tokenizer: TokenCounter) -> None:
    offline = OfflineLLM(tokenizer)
    online = OpenAILLM(api_key=None, base_url="http://127.0.0.1:9/v1", model="m")
    for llm in (offline, online):
        assert isinstance(llm, LLM) and isinstance(llm, SummaryModel)
    assert offline.is_offline and not online.is_offline


async def test_offline_reply_says_no_model_and_quotes_memory(tokenizer: TokenCounter) -> None:
    system = "Be brief.\n<<<MEMORY\n## Facts\n- Alice: order ORD-1042 is late\nMEMORY>>>\n"
    messages: list[ChatMessage] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "[Alice]: any news?"},
        {"role": "assistant", "content": "Not yet."},
        {"role": "user", "content": "[Bob]: and mine?"},
    ]
    llm = OfflineLLM(tokenizer)
    done = await llm.complete(messages, max_tokens=300, purpose="reply")
    assert "No language model is configured" in done.text
    assert "OPENAI_API_KEY" in done.text and "OPENAI_BASE_URL" in done.text
    assert "> - Alice: order ORD-1042 is late" in done.text
    assert "2 recent messages" in done.text  # the people's, not the bot's reply
    pieces = [p async for p in llm.stream(messages, max_tokens=300, purpose="reply")]
    assert len(pieces) == 3 and "".join(pieces) == done.text


async def test_offline_reply_without_memory(tokenizer: TokenCounter) -> None:
    done = await OfflineLLM(tokenizer).complete(MESSAGES, max_tokens=300, purpose="reply")
    assert "no summary" in done.text and "1 recent message." in done.text


async def test_offline_summary_rejects_foreign_request(tokenizer: TokenCounter) -> None:
    with pytest.raises(LLMBadResponse):
        await OfflineLLM(tokenizer).complete(MESSAGES, max_tokens=100, purpose="summary")


async def test_offline_summary_is_deterministic_and_bounded(tokenizer: TokenCounter) -> None:
    pytest.importorskip("memory.extractive")
    from memory.models import ChannelKey, Turn
    from memory.summarizer import build_summary_request

    key = ChannelKey("console", "local", "c")
    said = [
        ("Alice", "My order ORD-1042 has not arrived. Can someone check?"),
        ("민수", "주문번호 ORD-1042 배송이 늦어지고 있어요. 내일까지 확인해 주세요."),
        ("Bob", "We decided to refund orders older than 14 days. Mail billing@example.com."),
        ("Alice", "Thanks! I'll wait until Friday."),
    ] * 5
    turns = [
        Turn(key, i, f"m{i}", "user", who, who, text, tokenizer.count(text), float(i))
        for i, (who, text) in enumerate(said)
    ]
    messages = build_summary_request("", [], turns, max_tokens=60)
    meter = UsageMeter()
    llm = OfflineLLM(tokenizer, meter=meter)
    first = await llm.complete(messages, max_tokens=200, purpose="summary")
    second = await llm.complete(messages, max_tokens=200, purpose="summary")
    assert first == second
    assert first.text.strip() and tokenizer.count(first.text) <= 60
    assert meter.totals()["summary"].calls == 2


# --- the fake itself, as benchmarks and the console end-to-end test use it ---------------


async def test_fake_latency_hook_and_default_responder() -> None:
    def latency(body: dict[str, Any]) -> float:
        return 0.3 if is_summary_request(body) else 0.0

    summary_ask: list[ChatMessage] = [
        {"role": "system", "content": "Summarize the conversation."},
        {"role": "user", "content": "Token limit: 50\n<<<NEW MESSAGES>>>\n[Alice]: ORD-7 is late"},
    ]
    async with FakeOpenAI(responder=default_responder, latency=latency) as server:
        llm = OpenAILLM(api_key="k", base_url=server.base_url, model="gpt-test", max_retries=0)
        started = time.monotonic()
        assert (await llm.complete(MESSAGES, max_tokens=9, purpose="reply")).text == (
            "You said: Hello?"
        )
        replied = time.monotonic()
        summary = await llm.complete(summary_ask, max_tokens=99, purpose="summary")
        assert summary.text == "- Alice: ORD-7 is late"
        assert replied - started < 0.3 <= time.monotonic() - replied
        await llm.aclose()


@pytest.mark.slow
async def test_fake_runs_as_a_subprocess() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.openai_server", "--port", "0",
        cwd=REPO, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        llm = OpenAILLM(api_key=None, base_url=url, model="gpt-test", max_retries=0)
        chunks = [p async for p in llm.stream(MESSAGES, max_tokens=16, purpose="reply")]
        assert "".join(chunks) == "You said: Hello?"
        await llm.aclose()
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) is not None
