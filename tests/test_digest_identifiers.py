"""``/summary`` keeps every identifier: the ones the digest model dropped are put back
under the facts section, from the stored summary, the carried facts and the recent turns."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from memory.completion import ChatMessage
from memory.identifiers import contains_identifier
from memory.models import CarriedIdentifier, ChannelKey, Role, SummaryState, Turn
from memory.summarizer import Summarizer
from memory.summary_prompt import parse_summary_request
from memory.tokens import TokenCounter

KEY = ChannelKey("discord", "g1", "digest")
TOK = TokenCounter("gpt-4o")


@dataclass(frozen=True)
class _Answer:
    text: str


@dataclass
class DropsDigits:
    """A digest model that writes everything it was given but drops every token containing a
    digit (as a weak model paraphrases "ORD-2041" into "the order"). One call only."""

    heading: str
    calls: list[str] = field(default_factory=list)

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> _Answer:
        self.calls.append(purpose)
        if len(self.calls) > 1:
            raise AssertionError(f"unexpected model call #{len(self.calls)} ({purpose})")
        req = parse_summary_request(messages)
        assert req.digest
        lines = [req.previous, *req.facts, *(f"{who}: {text}" for who, text in req.blocks)]
        kept = [" ".join(w for w in line.split() if not re.search(r"[0-9]", w)) for line in lines]
        body = [f"- {line}" for line in kept if line.strip() and not line.startswith("#")]
        return _Answer("\n".join([self.heading, *body]))


def turn(seq: int, author: str, text: str, role: Role = "user") -> Turn:
    return Turn(KEY, seq, f"m{seq}", role, author.lower(), author, text, TOK.count(text), 1e9 + seq)


KOREAN_STATE = SummaryState(
    KEY,
    text="## 사실과 식별자\n- 민지: 주문 ORD-2041 환불 요청.",
    folded_through=10,
    facts=(
        CarriedIdentifier("#88", "민지: 이슈 #88 에서 논의", 3, 3),
        CarriedIdentifier("2027-03-14", "준호: 마감은 2027-03-14 입니다", 5, 5),
    ),
)
KOREAN_TURNS = [
    turn(11, "민지", "안녕하세요. 담당자 메일은 minji@example.kr 입니다."),
    turn(12, "준호", "배포는 v2.7.1 로 하기로 했습니다. 감사합니다!"),
]
ENGLISH_STATE = SummaryState(
    KEY,
    text="## Facts and identifiers\n- Alice: refund for ORD-2041 requested.",
    folded_through=10,
    facts=(
        CarriedIdentifier("#88", "Bob: discussed in issue #88", 3, 3),
        CarriedIdentifier("2027-03-14", "Carol: the deadline is 2027-03-14", 5, 5),
    ),
)
ENGLISH_TURNS = [
    turn(11, "Alice", "Hi! The contact is minji@example.kr for this."),
    turn(12, "Bob", "We agreed to deploy v2.7.1 on Friday. Thanks!"),
    turn(13, "gistbot", "Noted: ACK-4411, v2.7.1.", "assistant"),
]
IDENTS = ["ORD-2041", "#88", "2027-03-14", "minji@example.kr", "v2.7.1"]


@pytest.mark.parametrize(
    ("state", "turns", "heading"),
    [
        (KOREAN_STATE, KOREAN_TURNS, "## 사실과 식별자"),
        (ENGLISH_STATE, ENGLISH_TURNS, "## Facts and identifiers"),
    ],
    ids=["korean", "english"],
)
async def test_digest_shows_every_identifier_the_model_dropped(
    state: SummaryState, turns: list[Turn], heading: str
) -> None:
    model = DropsDigits(heading)
    text = await Summarizer(model, TOK).digest(state, turns, max_tokens=300)
    assert model.calls == ["digest"]  # put back without asking again
    for ident in IDENTS:
        assert contains_identifier(text, ident), (ident, text)
    # under the facts section the model wrote, once, with what each referred to
    assert text.count(heading) == 1 and text.startswith(heading)
    assert "- ORD-2041 — " in text and "- #88 — " in text
    assert "ACK-4411" not in text  # the bot's alone: not an identifier of the channel


async def test_digest_without_a_facts_section_gets_one() -> None:
    model = DropsDigits("## Topics")
    text = await Summarizer(model, TOK).digest(ENGLISH_STATE, ENGLISH_TURNS, max_tokens=300)
    head, facts = text.split("\n\n## Facts and identifiers\n")
    assert head.startswith("## Topics")
    for ident in IDENTS:  # the e-mail has no digit: the model kept it in its own text
        assert contains_identifier(head if "@" in ident else facts, ident), (ident, text)


async def test_nothing_is_appended_when_nothing_was_dropped() -> None:
    @dataclass
    class KeepsAll:
        async def complete(
            self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
        ) -> _Answer:
            return _Answer("## Facts and identifiers\n- " + ", ".join(IDENTS))

    text = await Summarizer(KeepsAll(), TOK).digest(ENGLISH_STATE, ENGLISH_TURNS, max_tokens=300)
    assert text == "## Facts and identifiers\n- " + ", ".join(IDENTS)
