"""``TokenCounter`` remembers the counts of short texts: a reply's view prices mostly the
same lines as the reply before it."""

from __future__ import annotations

from typing import Any

from memory.tokens import COUNT_CACHE_CHARS, LONG_CACHE_CHARS, LONG_CACHE_SIZE, TokenCounter


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


def test_a_few_long_texts_are_remembered_and_unknown_models_still_scaled() -> None:
    # A channel's summary is counted by every reply's view, twice, and changes only when
    # a compaction commits: the newest few long texts are remembered too.
    tok = TokenCounter("some-local-model")  # o200k x 1.1
    spy = _Spy(tok._enc)
    tok._enc = spy
    summary = "word " * (COUNT_CACHE_CHARS // 5 + 10)
    assert tok.count(summary) == tok.count(summary) > len(summary.split())
    assert spy.calls == 1
    for i in range(LONG_CACHE_SIZE):  # that many other long texts push it out
        tok.count(f"{i} {summary}")
    calls = spy.calls
    tok.count(summary)
    assert spy.calls == calls + 1
    assert tok.count("hello there") == tok.count("hello there") == 3  # ceil(2 x 1.1)


def test_texts_past_the_long_cache_bound_are_counted_each_time() -> None:
    tok = TokenCounter("gpt-4o")
    spy = _Spy(tok._enc)
    tok._enc = spy
    huge = "word " * (LONG_CACHE_CHARS // 5 + 10)
    assert tok.count(huge) == tok.count(huge) >= len(huge.split())
    assert spy.calls == 2  # not remembered: the caches' memory stays bounded
