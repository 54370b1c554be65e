"""A call's largest cost (``bot.llm.cost``), what its quota reservation holds, is never
below what an OpenAI-style provider counts: o200k tokens plus 3 a message and 3 to prime
the reply, plus the reply limit; images at their most. In English, Korean, code and emoji,
with the bot's tokenizer for an unknown model and without one."""

from __future__ import annotations

import pytest

from bot.llm.cost import IMAGE_TOKENS, LOW_DETAIL_TOKENS, chat_cost, text_cost
from memory.tokens import TokenCounter

TEXTS = [
    "Can you remind me what we decided about the release of v2.4.0 on Friday?",
    "금요일 배포 일정은 어떻게 정했죠? 티켓 OPS-4821 확인 부탁해요.",
    "def f(x):\n    return {k: v for k, v in x.items() if v is not None}  # 🚀🔥",
    "🙂" * 50 + " ok " * 30,
]


def provider_count(messages: list[dict[str, str]], max_tokens: int) -> int:
    o200k = TokenCounter("gpt-4o")
    return sum(o200k.count(m["content"]) + 3 for m in messages) + 3 + max_tokens


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("tokenizer", [TokenCounter("llama3:8b"), TokenCounter("gpt-4o"), None])
def test_the_estimate_is_never_below_what_the_provider_counts(
    text: str, tokenizer: TokenCounter | None
) -> None:
    messages = [{"role": "system", "content": "You are gistbot. " * 20},
                {"role": "user", "content": text}]
    assert chat_cost(messages, 800, tokenizer) >= provider_count(messages, 800)
    assert text_cost([text], tokenizer) >= TokenCounter("gpt-4o").count(text)


def test_image_parts_count_at_their_most() -> None:
    parts = [{"type": "text", "text": "what is in these?"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA",
                                                 "detail": "high"}},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA",
                                                 "detail": "low"}}]
    text_only = chat_cost([{"role": "user", "content": "what is in these?"}], 100, None)
    assert chat_cost([{"role": "user", "content": parts}], 100, None) == (
        text_only + IMAGE_TOKENS + LOW_DETAIL_TOKENS)
