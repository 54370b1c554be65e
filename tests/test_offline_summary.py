"""Offline summaries keep content, not courtesy; episode spans show the year and merge."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.llm.offline import OfflineLLM
from memory.extractive import extractive_summary, is_courtesy
from memory.models import ChannelKey, Episode, SummaryState, Turn
from memory.recall import episode_span, episode_spans
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter

KEY = ChannelKey("discord", "g1", "offline")
TOK = TokenCounter("gpt-4o")

ENGLISH = [
    ("Caroline", "Hey Mel! Good to see you!"),
    ("Caroline", "I went to a support group yesterday and it was so powerful."),
    ("Melanie", "Thanks, Caroline! I painted a sunrise over the lake last week."),
    ("Caroline", "haha see you"),
    ("Melanie", "good morning! The kids start swimming lessons on Saturday."),
    ("Caroline", "Thanks, Melanie! Counseling is the career I am researching now."),
    ("Melanie", "Wow, congrats Caroline!"),
]
CONTENT = [
    "support group yesterday",
    "painted a sunrise",
    "swimming lessons",
    "career I am researching",
]
COURTESY = ["Hey Mel", "Thanks, Caroline", "haha", "good morning", "Thanks, Melanie", "congrats"]

KOREAN = [
    ("민지", "안녕하세요! 감사합니다."),
    ("준호", "안녕하세요. 다음 주에 도자기 수업을 듣기 시작했어요."),
    ("민지", "감사합니다 준호님! 저는 주말에 등산을 다녀왔어요."),
    ("준호", "네 알겠습니다 ㅎㅎ"),
]


def turns_of(lines: list[tuple[str, str]]) -> list[Turn]:
    return [
        Turn(KEY, i + 1, f"m{i}", "user", who, who, text, TOK.count(text), 1e9 + i)
        for i, (who, text) in enumerate(lines)
    ]


@pytest.mark.parametrize(
    "sentence",
    ["Thanks, Caroline!", "haha see you", "good morning!", "Hey Mel!", "감사합니다",
     "안녕하세요.", "준호님 감사합니다!", "네 알겠습니다 ㅎㅎ", "ありがとうございます。"],
)
def test_courtesy_lines(sentence: str) -> None:
    assert is_courtesy(sentence, ["Caroline", "Melanie", "Mel", "민지", "준호"])


@pytest.mark.parametrize(
    "sentence",
    ["Thanks, I'll send the invoice tomorrow.", "I painted a sunrise.", "도자기 수업을 들어요.",
     "Thanks for ORD-2041."],
)
def test_content_is_not_courtesy(sentence: str) -> None:
    assert not is_courtesy(sentence, ["Caroline"])


def test_greetings_never_crowd_content_out() -> None:
    full = extractive_summary("", [], ENGLISH, max_tokens=600, tokenizer=TOK)
    for needle in CONTENT:
        assert needle in full, (needle, full)
    for needle in COURTESY:
        assert needle not in full, (needle, full)
    # many more courtesy lines change nothing: they are never items, so they cannot
    # displace content (they used to land in "People and preferences" and outlive it)
    chatty = [*ENGLISH, *[("Melanie", "Thanks, Caroline!"), ("Caroline", "haha see you")] * 20]
    for bound in (600, TOK.count(full), 30):
        plain = extractive_summary("", [], ENGLISH, max_tokens=bound, tokenizer=TOK)
        assert extractive_summary("", [], chatty, max_tokens=bound, tokenizer=TOK) == plain


def test_korean_courtesy_is_left_out() -> None:
    text = extractive_summary("", [], KOREAN, max_tokens=600, tokenizer=TOK)
    assert "도자기 수업" in text and "등산" in text
    assert "안녕하세요" not in text and "감사합니다" not in text and "알겠습니다" not in text


@pytest.mark.parametrize(
    ("lines", "content", "courtesy"),
    [
        (ENGLISH, ["support group", "painted a sunrise"], ["Hey Mel", "Thanks, Caroline"]),
        (KOREAN, ["등산", "도자기 수업"], ["안녕하세요", "감사합니다"]),
    ],
    ids=["english", "korean"],
)
async def test_offline_episodes_carry_content_sentences(
    lines: list[tuple[str, str]], content: list[str], courtesy: list[str]
) -> None:
    result = await Summarizer(OfflineLLM(TOK), TOK, summary_tokens=300).summarize(
        SummaryState(KEY), turns_of(lines)
    )
    assert result.episode_fallback  # the offline model writes no episode block
    for needle in content:
        assert needle in result.episode, (needle, result.episode)
    for needle in courtesy:
        assert needle not in result.episode, (needle, result.episode)


# -- episode spans ----------------------------------------------------------------------------


def at(year: int, month: int, day: int, hour: int, minute: int) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


def episode(start: float, end: float, n: int = 1) -> Episode:
    return Episode(KEY, n, n, n, start, end, ("Alice",), "talked")


NOW = at(2027, 6, 1, 12, 0)


def test_episode_span_shows_the_year_only_when_it_is_not_this_one() -> None:
    assert episode_span(episode(at(2027, 3, 3, 10, 2), at(2027, 3, 3, 10, 40)), NOW) == (
        "3 Mar 10:02–10:40"
    )
    assert episode_span(episode(at(2025, 3, 3, 10, 2), at(2025, 3, 3, 10, 40)), NOW) == (
        "3 Mar 2025 10:02–10:40"
    )
    assert episode_span(episode(at(2026, 12, 31, 23, 50), at(2027, 1, 1, 0, 10)), NOW) == (
        "31 Dec 2026 23:50–1 Jan 00:10"
    )


def test_identical_spans_are_merged() -> None:
    same = [episode(at(2027, 3, 3, 10, 2), at(2027, 3, 3, 10, 40), n) for n in (1, 2, 3)]
    other = episode(at(2027, 3, 4, 9, 0), at(2027, 3, 4, 9, 30), 4)
    assert episode_spans([*same, other], NOW) == "3 Mar 10:02–10:40 (×3), 4 Mar 09:00–09:30"
    assert episode_spans([], NOW) == ""
