"""``adapters.chunking``: platform-sized chunks, balanced code fences, nothing lost."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.chunking import MIN_LIMIT, split_message, split_parts

FENCE_LINE = re.compile(r"^ {0,3}```", re.MULTILINE)


def fence_lines(chunk: str) -> int:
    """How many fence lines a chat client sees in one message (the documented rule)."""
    return len(FENCE_LINE.findall(chunk))


def strip_added(chunk_text: str, opener: str, closer: str) -> str:
    """A chunk's text without the fence lines the splitter added."""
    out = chunk_text
    if opener:
        assert out.startswith(opener), (out, opener)
        out = out[len(opener):]
    if closer:
        assert out.endswith(closer), (out, closer)
        out = out[: -len(closer)]
    return out


# ---------------------------------------------------------------- examples

def test_short_text_is_one_chunk() -> None:
    assert split_message("hello there", 2000) == ["hello there"]


def test_blank_text_is_no_chunk() -> None:
    assert split_message("", 2000) == []
    assert split_message("\n\n  \n", 2000) == []


def test_limit_below_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        split_message("x" * 100, MIN_LIMIT - 1)


def test_prefers_paragraph_then_line_then_word() -> None:
    para = "a" * 60 + "\n\n" + "b" * 60
    assert split_message(para, 100) == ["a" * 60, "b" * 60]
    lines = "a" * 60 + "\n" + "b" * 60
    assert split_message(lines, 100) == ["a" * 60, "b" * 60]
    words = " ".join(["word"] * 40)  # 199 characters, no newline
    chunks = split_message(words, 100)
    assert all(len(c) <= 100 for c in chunks)
    assert all(not c.startswith("ord") for c in chunks)  # never mid-word
    assert " ".join(chunks).split() == words.split()


def test_hard_split_when_there_is_no_boundary() -> None:
    chunks = split_message("x" * 250, 100)
    assert len(chunks) == 3 and all(80 < len(c) <= 100 for c in chunks[:2])
    assert "".join(chunks) == "x" * 250


def test_code_block_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"print({i})" for i in range(40))
    text = f"Here you go:\n\n```python\n{code}\n```\nDone."
    chunks = split_message(text, 120)
    assert len(chunks) > 2
    for chunk in chunks:
        assert len(chunk) <= 120
        assert fence_lines(chunk) % 2 == 0, chunk
    assert chunks[1].startswith("```python\n")
    assert chunks[-1].endswith("Done.")
    body = "".join(strip_added(c.opener + c.body + c.closer, c.opener, c.closer)
                   for c in split_parts(text, 120))
    assert body == text


def test_unclosed_fence_is_closed_in_the_last_chunk() -> None:
    chunks = split_message("```\nx = 1\n", 100)
    assert chunks == ["```\nx = 1\n```"]


def test_cjk_text_splits_on_sentence_punctuation() -> None:
    text = "会議は明日です。" * 30  # no spaces at all
    chunks = split_message(text, 100)
    assert all(len(c) <= 100 for c in chunks)
    assert all(c.endswith("。") for c in chunks)
    assert "".join(chunks) == text


def test_does_not_start_a_chunk_with_mid_line_backticks() -> None:
    text = "a" * 90 + " ```not a fence``` and more words " * 3
    for chunk in split_message(text, 100):
        assert fence_lines(chunk) % 2 == 0, chunk


# ---------------------------------------------------------------- properties

WORD = st.text(alphabet="abcxyz가나다日本語😀`#*_", min_size=1, max_size=30)
PROSE = st.lists(WORD, min_size=1, max_size=40).map(" ".join)
LINE = st.one_of(PROSE, st.text(alphabet="ab `\t", max_size=50))
CODE = st.builds(
    lambda lang, lines, indent, closed: (
        f"{indent}```{lang}\n" + "\n".join(lines) + (f"\n{indent}```" if closed else "")
    ),
    st.sampled_from(["", "python", "js", "c++", "not a language tag"]),
    st.lists(LINE, max_size=30),
    st.sampled_from(["", " ", "   "]),
    st.booleans(),
)
BLOCK = st.one_of(PROSE, CODE, st.just(""), st.text(alphabet=" \n", max_size=5))
DOCUMENT = st.lists(BLOCK, max_size=15).map("\n".join)
LIMIT = st.integers(min_value=MIN_LIMIT, max_value=400)


@settings(max_examples=400, deadline=None)
@given(text=DOCUMENT, limit=LIMIT)
def test_chunks_fit_balance_fences_and_keep_the_text(text: str, limit: int) -> None:
    parts = split_parts(text, limit)
    assert "".join(p.body for p in parts) == text
    for p in parts:
        rendered = p.opener + p.body + p.closer
        assert len(p.text) <= len(rendered) <= limit
        assert fence_lines(p.text) % 2 == 0, p
        assert p.opener == "" or re.fullmatch(r"```[A-Za-z0-9_+#.\-]{0,20}\n", p.opener)
        assert p.closer in ("", "```", "\n```")
    messages = split_message(text, limit)
    assert all(m.strip() and len(m) <= limit for m in messages)
    assert bool(messages) == bool(text.strip())


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="ab \n`", max_size=1200), limit=LIMIT)
def test_any_text_fits_and_is_kept(text: str, limit: int) -> None:
    parts = split_parts(text, limit)
    assert "".join(p.body for p in parts) == text
    assert all(len(p.opener + p.body + p.closer) <= limit for p in parts)
