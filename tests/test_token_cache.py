"""``TokenCounter`` remembers the counts of short texts: a reply's view prices mostly the
same lines as the reply before it."""

from __future__ import annotations

from typing import Any

from memory.tokens import COUNT_CACHE_CHARS, TokenCounter


class _Spy:
    """Wraps a tiktoken encoding and counts ``encode`` calls."""

    def __init__(self, enc: Any) -> None:
        self.enc, self.calls = enc, 0

    def encode(self, text: str, **kw: Any) -> list[int]:
        self.calls += 1
        return list(self.enc.encode(text, **kw))

    def decode(self, ids: list[int]) -> str:
        return str(self.enc.decode(ids))


def test_a_short_text_is_encoded_once_and_counted_the_same() -> None:
    tok = TokenCounter("gpt-4o")
    spy = _Spy(tok._enc)
    tok._enc = spy
    line = "- 14:02 Dana: the order ORD-2041 was charged twice"
    first = tok.count(line)
    assert [tok.count(line) for _ in range(5)] == [first] * 5
    assert spy.calls == 1
    assert first == len(spy.enc.encode(line, disallowed_special=()))


def test_long_texts_are_counted_each_time_and_unknown_models_still_scaled() -> None:
    tok = TokenCounter("some-local-model")  # o200k x 1.1
    spy = _Spy(tok._enc)
    tok._enc = spy
    long = "word " * (COUNT_CACHE_CHARS // 5 + 10)
    assert tok.count(long) == tok.count(long) > len(long.split())
    assert spy.calls == 2  # not remembered: the cache's memory stays bounded
    assert tok.count("hello there") == tok.count("hello there") == 3  # ceil(2 x 1.1)
