"""The offline extractive summarizer: what it keeps, in which section, and within the bound."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.extractive import extractive_summary
from memory.identifiers import contains_identifier
from memory.models import ChannelKey, SummaryState, Turn
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter
from tests.fakes.models import ExtractiveModel

TOK = TokenCounter("gpt-4o")
KEY = ChannelKey("slack", "T1", "C1")


def summary(previous: str, blocks: list[tuple[str, str]], max_tokens: int = 600) -> str:
    return extractive_summary(previous, [], blocks, max_tokens=max_tokens, tokenizer=TOK)


def section(text: str, title: str) -> list[str]:
    """The bullet lines under ``## title``."""
    for part in text.split("\n\n"):
        head, *lines = part.split("\n")
        if head == f"## {title}":
            assert all(line.startswith("- ") for line in lines), part
            return [line[2:] for line in lines]
    return []


ENGLISH = [
    ("Alice", "Hi all! My order ORD-1042 has not arrived."),
    ("Bob", "ok. The warehouse is short-staffed this week."),
    ("Bob", "We agreed to refund it on Friday. Can Carol check the warehouse?"),
    ("Carol", "I prefer tea, by the way. Random musing about the weather."),
]


def test_keeps_important_sentences_by_section_with_speakers() -> None:
    text = summary("", ENGLISH)
    titles = [line for line in text.split("\n") if line.startswith("## ")]
    assert titles == [
        "## Topics",
        "## Facts and identifiers",
        "## Decisions",
        "## Open requests",
        "## People and preferences",
    ]
    assert section(text, "Facts and identifiers") == ["Alice: My order ORD-1042 has not arrived."]
    assert section(text, "Decisions") == ["Bob: We agreed to refund it on Friday."]
    assert section(text, "Open requests") == ["Bob: Can Carol check the warehouse?"]
    assert section(text, "People and preferences") == ["Carol: I prefer tea, by the way."]
    # A greeting is no topic (courtesy never displaces content): the first content sentence is.
    assert section(text, "Topics") == ["Bob: The warehouse is short-staffed this week."]
    assert "weather" not in text and "Bob: ok" not in text and "Hi all" not in text


def test_korean_without_spaces_or_capitals() -> None:
    text = summary(
        "",
        [
            (
                "민수",
                "안녕하세요. 주문번호 ORD-7731로 환불해 주세요. 연락처는 010-1234-5678입니다.",
            ),
            ("지영", "네. 내일까지 처리하기로 했습니다. 배송은 언제 되나요"),
            ("민수", "지영님 감사합니다"),
        ],
    )
    assert section(text, "Facts and identifiers") == [
        "민수: 주문번호 ORD-7731로 환불해 주세요.",
        "민수: 연락처는 010-1234-5678입니다.",
    ]
    assert section(text, "Decisions") == ["지영: 내일까지 처리하기로 했습니다."]
    assert section(text, "Open requests") == ["지영: 배송은 언제 되나요"]
    # 안녕하세요, 네 and "지영님 감사합니다" are courtesy, not people or topics.
    assert section(text, "People and preferences") == []
    assert "감사합니다" not in text and "안녕하세요" not in text


def test_japanese_without_spaces() -> None:
    said = "注文番号は48213です。明日発送することにしました。いつ届きますか"
    text = summary("", [("田中", said)])
    assert section(text, "Facts and identifiers") == ["田中: 注文番号は48213です。"]
    assert section(text, "Decisions") == ["田中: 明日発送することにしました。"]
    assert section(text, "Open requests") == ["田中: いつ届きますか"]


def test_previous_items_come_before_new_ones() -> None:
    previous = "## Decisions\n- Carol: we will use Postgres\n\n## Topics\n- shipping delays"
    text = summary(previous, [("Dan", "Let's also add Redis.")])
    assert section(text, "Decisions") == [
        "Carol: we will use Postgres",
        "Dan: Let's also add Redis.",
    ]
    assert section(text, "Topics") == ["shipping delays"]


def test_over_budget_drops_oldest_plain_items_and_keeps_identifiers() -> None:
    chores = ("one", "two", "three", "four", "five", "six")
    previous = "\n".join(["## Decisions", *(f"- Eve: we will do chore number {w}" for w in chores)])
    blocks = [("Alice", "Refund ticket INC0012345 please."), ("Bob", "We will do the last chore.")]
    full = summary(previous, blocks)
    budget = TOK.count(full) - 12
    text = summary(previous, blocks, max_tokens=budget)
    assert TOK.count(text) <= budget
    assert contains_identifier(text, "INC0012345")
    assert "Bob: We will do the last chore." in text
    assert "chore number one" not in text
    assert "chore number six" in text


def test_identifier_items_go_last_oldest_first() -> None:
    blocks = [
        ("A", "first id ORD-1111 here."),
        ("B", "second id ORD-2222 here."),
        ("C", "we will chat."),
    ]
    budget = TOK.count("## Facts and identifiers\n- B: second id ORD-2222 here.")
    text = summary("", blocks, max_tokens=budget)
    assert text == "## Facts and identifiers\n- B: second id ORD-2222 here."


def test_chit_chat_only_still_yields_something() -> None:
    assert summary("", [("Bob", "ok"), ("Amy", "ㅋㅋ")]) == "## Topics\n- Amy: ㅋㅋ"
    assert summary("", []) == ""
    assert summary("", [("Bob", "  \n ")]) == ""


def test_one_huge_sentence_is_cut_to_fit() -> None:
    text = summary("", [("Bob", "ORD-1042 " + "가나다라" * 400)], max_tokens=40)
    assert text and TOK.count(text) <= 40
    assert text.startswith("## Facts and identifiers\n- Bob: ORD-1042")


class CharCounter:
    """A tokenizer where headers cost far more than the cheap estimate assumes."""

    def count(self, text: str) -> int:
        return len(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return text[: max(0, max_tokens)]


@given(st.integers(0, 400))
def test_bound_holds_for_any_tokenizer(max_tokens: int) -> None:
    text = extractive_summary(
        "## Topics\n- old news", [], ENGLISH, max_tokens=max_tokens, tokenizer=CharCounter()
    )
    assert len(text) <= max_tokens
    if max_tokens >= 70:
        assert "ORD-1042" in text


def test_carried_facts_are_not_repeated() -> None:
    text = extractive_summary(
        "",
        ["JIRA-9 — Bob: see JIRA-9"],
        [("Amy", "hello there friends")],
        max_tokens=100,
        tokenizer=TOK,
    )
    assert "JIRA-9" not in text


_SENTENCE = st.one_of(
    st.sampled_from(
        [
            "주문번호 ORD-7731로 환불해 주세요.",
            "注文番号は48213です。",
            "Let's ship?",
            "We will decide.",
            "ok",
            "민수님 좋아요",
            "\n",
            "## Topics",
            "- item",
            "https://ex.com/a",
            "12,500원",
        ]
    ),
    st.text(max_size=40),
)
_BLOCK_TEXT = st.lists(_SENTENCE, max_size=6).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(
    previous=_BLOCK_TEXT,
    blocks=st.lists(st.tuples(st.text(max_size=8), _BLOCK_TEXT), max_size=6),
    max_tokens=st.integers(0, 200),
)
def test_never_over_the_bound_and_deterministic(
    previous: str, blocks: list[tuple[str, str]], max_tokens: int
) -> None:
    text = summary(previous, blocks, max_tokens)
    assert TOK.count(text) <= max_tokens
    assert text == summary(previous, blocks, max_tokens)
    if max_tokens >= 60 and any(t.strip() for _, t in blocks):
        assert text.strip()


def _turn(seq: int, author: str, text: str) -> Turn:
    return Turn(KEY, seq, str(seq), "user", author, author, text, TOK.count(text), float(seq))


async def test_offline_summaries_pass_the_summarizer_checks() -> None:
    turns = [
        _turn(1, "민수", "주문번호 ORD-7731로 환불해 주세요."),
        _turn(2, "민수", "연락처는 010-1234-5678입니다."),
        _turn(3, "지영", "환불 금액은 12,500원입니다. 내일 처리하기로 했어요."),
    ]
    # what bot.llm.offline.OfflineLLM does for summaries, without importing bot
    s = Summarizer(ExtractiveModel(TOK, allow_digest=True), TOK, summary_tokens=200)
    first = await s.summarize(SummaryState(KEY), turns)
    assert (first.calls, first.facts, first.missing_after_retry) == (1, (), ())
    state = SummaryState(KEY, text=first.text, folded_through=3)
    second = await s.summarize(state, [_turn(4, "Bob", "Any update on the refund?")])
    assert second.calls == 1
    for ident in ("ORD-7731", "010-1234-5678", "12,500"):
        assert contains_identifier(second.text, ident)
    digest = await s.digest(state, [_turn(4, "Bob", "We agreed on Friday.")], max_tokens=200)
    assert "Bob: We agreed on Friday." in digest
