"""Compaction makes progress with any model: an answer over the bound is trimmed, not
rejected, keeping the facts section; the request's ``max_tokens`` agrees with the bound."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memory.completion import ChatMessage
from memory.config import MemoryConfig
from memory.errors import SummaryRejected
from memory.identifiers import contains_identifier, extract_identifiers
from memory.manager import MemoryManager
from memory.models import ChannelKey, NewTurn, SummaryState, Turn
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import ARCHIVE_TOKENS, Summarizer, answer_room
from memory.summary_fit import add_to_facts, shorten_summary
from memory.summary_prompt import SummaryRequest, parse_summary_request
from memory.tokens import TokenCounter
from memory.window import WindowPolicy

KEY = ChannelKey("slack", "T1", "C-bound")
TOK = TokenCounter("gpt-4o")
BOUND = 400


@dataclass(frozen=True)
class _Answer:
    text: str


@dataclass
class LongWinded:
    """A model that always answers 1.5x the bound the request states: the facts it was
    given, then rambling topics and people. Raises on more calls than ``max_calls`` or on
    a request it cannot parse."""

    max_calls: int
    factor: float = 1.5
    calls: list[tuple[SummaryRequest, int, str]] = field(default_factory=list)

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> _Answer:
        req = parse_summary_request(messages)
        self.calls.append((req, max_tokens, purpose))
        if len(self.calls) > self.max_calls:
            raise AssertionError(f"unexpected model call #{len(self.calls)} ({purpose})")
        return _Answer(self.answer(req))

    def answer(self, req: SummaryRequest) -> str:
        source = [req.previous, *req.facts, *(text for _, text in req.blocks), *req.missing]
        ids = dict.fromkeys(i for text in source for i in extract_identifiers(text))
        facts = ["## Facts and identifiers", *(f"- {i} was mentioned." for i in ids)]
        people = ["## People and preferences", "- Alice likes long meetings, apparently."]
        target = int(req.max_tokens * self.factor)
        topics = ["## Topics"]
        n = 0
        while TOK.count("\n".join([*topics, "", *facts, "", *people])) < target:
            n += 1
            topics.append(f"- The team talked at length about subject {'x' * (n % 7)} again.")
        return "\n".join([*topics, "", *facts, "", *people])


LINES = [
    ("Alice", "My order ORD-2041 never arrived."),
    ("Bob", "Opened INC0012345 for it, see https://status.example.com/i/7."),
    ("Carol", "The refund is $120.50, due 2027-03-14."),
    ("Alice", "Thanks! Lunch?"),
    ("Bob", "Deploy v2.7.1 first."),
    ("Carol", "Mail minji@example.kr about #88."),
    ("Alice", "We agreed to ship on Friday."),
    ("Bob", "Sounds good to me."),
]


async def test_a_model_that_always_runs_long_still_compacts(tmp_path: Path) -> None:
    model = LongWinded(max_calls=40)
    store = SqliteStore(tmp_path / "bound.db", synchronous="OFF")
    await store.open()
    mgr = MemoryManager(store, Summarizer(model, TOK, summary_tokens=BOUND), TOK,
                        WindowPolicy(max_messages=10, keep_messages=4),
                        config=MemoryConfig(retry_base=0.01))
    said: list[str] = []
    try:
        for i in range(40):
            who, text = LINES[i % len(LINES)]
            await mgr.record(NewTurn(KEY, f"m{i}", "user", who.lower(), who, text, 0, 1e9 + i))
            said += extract_identifiers(text)
            await mgr.wait_idle()
        state = await store.state(KEY, facts_limit=1000)
    finally:
        await mgr.close()
        await store.close()
    assert mgr.compaction_failures == 0 and mgr.compactions >= 5
    assert state.folded_through >= 30
    assert TOK.count(state.text) <= BOUND
    assert "## Facts and identifiers" in state.text  # kept; the rambling went first
    assert "## People and preferences" not in state.text
    facts = {f.value for f in state.facts}
    for ident in dict.fromkeys(said):
        assert contains_identifier(state.text, ident) or ident in facts, ident
    for req, max_tokens, purpose in model.calls:
        assert purpose == "summary" and req.max_tokens == BOUND
        assert max_tokens == answer_room(BOUND) + ARCHIVE_TOKENS  # a quarter over, not 2x
    assert answer_room(BOUND) == BOUND * 5 // 4


async def test_an_over_long_digest_is_trimmed_not_an_error() -> None:
    model = LongWinded(max_calls=1)
    turns = [
        Turn(KEY, i + 1, f"m{i}", "user", who.lower(), who, text, TOK.count(text), 1e9 + i)
        for i, (who, text) in enumerate(LINES)
    ]
    text = await Summarizer(model, TOK, summary_tokens=BOUND).digest(
        SummaryState(KEY), turns, max_tokens=200
    )
    assert TOK.count(text) <= 200
    for _, line in LINES:
        for ident in extract_identifiers(line):
            assert contains_identifier(text, ident), (ident, text)


@pytest.mark.parametrize("answer", ["", "  \n", "Error: upstream failed", "<think>hmm</think>"])
async def test_empty_and_error_like_answers_are_still_rejected(answer: str) -> None:
    @dataclass
    class Once:
        used: bool = False

        async def complete(
            self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
        ) -> _Answer:
            assert not self.used, "unexpected second call"
            self.used = True
            return _Answer(answer)

    turns = [Turn(KEY, 1, "m1", "user", "a", "Alice", "ORD-2041 is late", 5, 1e9)]
    with pytest.raises(SummaryRejected):
        await Summarizer(Once(), TOK, summary_tokens=BOUND).summarize(SummaryState(KEY), turns)
    with pytest.raises(SummaryRejected):
        await Summarizer(Once(), TOK).digest(SummaryState(KEY), turns, max_tokens=100)


# -- shorten_summary --------------------------------------------------------------------------

SUMMARY = """## Topics
- The team discussed the roadmap. It was long.

## Facts and identifiers
- Alice's order ORD-2041 is late. She is upset.
- Bob opened INC0012345.

## Decisions
- Ship on Friday; Carol confirmed ticket 5521.

## People and preferences
- Alice prefers e-mail. Bob likes tea."""


def test_under_the_bound_is_unchanged() -> None:
    assert shorten_summary(SUMMARY, TOK.count(SUMMARY), TOK) == SUMMARY


def test_trimming_drops_plain_sentences_last_sections_first() -> None:
    full = TOK.count(SUMMARY)
    text = shorten_summary(SUMMARY, full - 8, TOK)
    assert TOK.count(text) <= full - 8
    assert "## People and preferences" not in text  # dropped first, heading and all
    assert "roadmap" in text  # earlier plain sentences still there


def test_identifiers_and_the_facts_section_go_last() -> None:
    text = shorten_summary(SUMMARY, 40, TOK)
    assert TOK.count(text) <= 40
    assert text.startswith("## Facts and identifiers")
    for ident in ("ORD-2041", "INC0012345"):
        assert ident in text
    assert "upset" not in text and "tea" not in text


def test_one_endless_line_is_cut_with_an_ellipsis() -> None:
    text = shorten_summary("ORD-1042 " + "word " * 700, 50, TOK)
    assert TOK.count(text) <= 50 and text.startswith("ORD-1042") and text.endswith("…")


@pytest.mark.parametrize("bound", [1, 2, 5, 17, 60, 100])
def test_never_over_the_bound(bound: int) -> None:
    korean = "## 사실과 식별자\n- 주문 ORD-7731 환불. 연락처 010-1234-5678."
    for text in (SUMMARY, "가나다 " * 300, korean):
        assert TOK.count(shorten_summary(text, bound, TOK)) <= bound


def test_add_to_facts_finds_a_translated_heading() -> None:
    korean = "## 주제\n- 환불 이야기\n\n## 사실과 식별자\n- 민수: 주문\n\n## 결정\n- 내일"
    assert add_to_facts(korean, ["- ORD-2041"]) == (
        "## 주제\n- 환불 이야기\n\n## 사실과 식별자\n- 민수: 주문\n- ORD-2041\n\n## 결정\n- 내일"
    )
    assert add_to_facts("## Topics\n- x", ["- #88"]) == (
        "## Topics\n- x\n\n## Facts and identifiers\n- #88"
    )
    assert add_to_facts("## Topics\n- x", []) == "## Topics\n- x"
