"""The identifier ledger: a precise rule, who said it, and requests bounded by the fold.

A summarizer request shows only the carried identifiers relevant to the turns it folds
(plus a few recent ones), so its size does not grow with the channel's age; the ones left
out stay in the ledger, because the store upserts what the summarizer returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memory.completion import ChatMessage
from memory.identifiers import contains_identifier, extract_identifiers, mentioned_in
from memory.ledger import (
    CARRIED_TOKENS,
    RECENT_FACTS,
    facts_for_request,
    required_identifiers,
)
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    LongTermFact,
    NewTurn,
    Role,
    SummaryState,
    Turn,
)
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.summary_prompt import parse_summary_request
from memory.tokens import TokenCounter

KEY = ChannelKey("discord", "g1", "ledger")
TOK = TokenCounter("gpt-4o")
SUMMARY_TOKENS = 600
MARGIN = 1000  # the target: request <= fold tokens + SUMMARY_TOKENS + 1,000


@dataclass(frozen=True)
class _Answer:
    text: str


@dataclass
class Scripted:
    """Answers each call with the next function of the parsed request; an unexpected call
    fails the test (and ``done`` says whether every step was used)."""

    steps: list[object]
    calls: list[tuple[list[ChatMessage], int]] = field(default_factory=list)

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> _Answer:
        self.calls.append((list(messages), max_tokens))
        if not self.steps:
            raise AssertionError(f"unexpected model call #{len(self.calls)} ({purpose})")
        step = self.steps.pop(0)
        assert callable(step)
        return _Answer(step(parse_summary_request(messages)))

    @property
    def done(self) -> bool:
        return not self.steps


def turn(seq: int, author: str, text: str, role: Role = "user") -> Turn:
    return Turn(KEY, seq, f"m{seq}", role, author.lower(), author, text, TOK.count(text), 1e9 + seq)


# -- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tickets ORD-2041, INC0012345, 4B-217 and Q-7720-B", ["ORD-2041", "INC0012345",
                                                               "4B-217", "Q-7720-B"]),
        ("#88, order 48213, ticket 5521, invoice no. 7731", ["#88", "48213", "5521", "7731"]),
        ("주문번호는 1234, 注文番号は48213です", ["1234", "48213"]),
        ("see https://ex.com/a or mail minji@example.kr", ["https://ex.com/a", "minji@example.kr"]),
        ("due 2027-03-14 or 14/03/2027, 2027년 3월 14일", ["2027-03-14", "14/03/2027",
                                                          "2027년 3월 14일"]),
        ("upgrade to v2.7.1 (or 2.7.1)", ["v2.7.1", "2.7.1"]),
        ("$120.50, 12,500원 and €40", ["$120.50", "12,500원", "€40"]),
        ("run `make test` on a1b2c3d", ["make test", "a1b2c3d"]),
        ("call 010-1234-5678 or +1 415 555 0100", ["010-1234-5678", "+1 415 555 0100"]),
        ("id 123e4567-e89b-12d3-a456-426614174000", ["123e4567-e89b-12d3-a456-426614174000"]),
    ],
)
def test_what_a_person_needs_verbatim_is_an_identifier(text: str, expected: list[str]) -> None:
    assert extract_identifiers(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "ACK 100",
        "ACK 400, next batch",
        "Stay under 600 tokens.",
        "3 people came, 12 stayed",
        "back in 2027",
        "it costs 1,200 more, about 3.14 times, 12.5% of it",
        "at 10:30, pages 1-2, 2024-2025",
        "gpt-4o and v2 and ORD-1",
    ],
)
def test_bare_small_numbers_are_not_identifiers(text: str) -> None:
    assert extract_identifiers(text) == []


# -- who said it ------------------------------------------------------------------------------


def test_the_bots_identifiers_count_only_when_a_user_said_them_too() -> None:
    turns = [
        turn(1, "Alice", "My order ORD-2041 is late."),
        turn(2, "gistbot", "ACK-100: noted ORD-2041; see KB-4411 and INC0099887.", "assistant"),
    ]
    previous = "## Facts and identifiers\n- Bob: INC0099887 is the incident."
    required = required_identifiers(previous, (), turns, max_tokens=SUMMARY_TOKENS)
    assert required == ["ORD-2041", "INC0099887"]  # not ACK-100 nor KB-4411: the bot's alone


def test_gistbots_own_prompt_text_never_becomes_an_identifier() -> None:
    # A model echoed the request's "Token limit" into its summary; with a 5-digit bound that
    # number looks like an identifier, but it came from gistbot, not from a person.
    previous = "## Topics\n- Summary (token limit 12000). Alice asked about ORD-2041."
    turns = [turn(1, "Alice", "Any news?")]
    assert required_identifiers(previous, (), turns, max_tokens=12000) == ["ORD-2041"]
    said = [turn(1, "Alice", "The budget is 12000 dollars, order 12000 too.")]
    assert "12000" in required_identifiers(previous, (), said, max_tokens=12000)


async def test_a_long_run_with_counters_carries_no_counter() -> None:
    """The bot's "ACK 100" … "ACK 400" and the request's "600" never reach the ledger."""
    turns = []
    for i in range(1, 41):
        if i % 2:
            turns.append(turn(i, "Alice", f"batch {i} is done, counted 3{i:02d} rows"))
        else:
            turns.append(turn(i, "gistbot", f"ACK {i * 10}. Stay under 600 tokens.", "assistant"))
    turns.append(turn(41, "Alice", "The real one is order 48213."))

    def echo(req: object) -> str:  # a model that echoes the rules and drops everything
        return "## Topics\n- Alice reported batches; summary under 600 tokens."

    model = Scripted([echo, echo])
    result = await Summarizer(model, TOK, summary_tokens=600).summarize(SummaryState(KEY), turns)
    assert [f.value for f in result.facts] == ["48213"]
    assert model.done


# -- bounded requests -------------------------------------------------------------------------


def ledger(n: int) -> tuple[CarriedIdentifier, ...]:
    """``n`` carried identifiers, each with a realistic context line, newest last."""
    topics = ("refund", "shipping", "invoice", "warehouse", "billing", "login", "export")
    return tuple(
        CarriedIdentifier(
            f"ORD-{10000 + i}",
            f"Customer{i % 37}: my {topics[i % len(topics)]} issue is order ORD-{10000 + i}, "
            f"opened on the {i % 28 + 1}th, please check",
            i,
            i,
        )
        for i in range(n)
    )


def fold_at(seq: int) -> list[Turn]:
    """Twelve turns at ``seq``: two mention carried identifiers, one a rare shared word."""
    lines = [
        ("Alice", "Morning. The refund for ORD-10007 went through."),
        ("Bob", "Good, and the warehouse export finished overnight."),
        ("Carol", "Customer12 wrote again about ORD-10391, still waiting."),
        ("Alice", "I'll call them after lunch."),
        ("Bob", "New ticket for the billing bug: INC0077812."),
        ("Carol", "Thanks!"),
    ] * 2
    return [turn(seq + i, who, text) for i, (who, text) in enumerate(lines)]


def request_tokens(messages: Sequence[ChatMessage]) -> int:
    return sum(TOK.count(m["content"]) + 4 for m in messages)  # 4: a message's framing


def fold_tokens(turns: Sequence[Turn]) -> int:
    return sum(t.tokens + TOK.count(f"[{t.author_name}]: ") for t in turns)


PREVIOUS = "## Topics\n" + "\n".join(
    f"- Alice and Bob discussed shipment wave {i} and its paperwork at length." for i in range(60)
)


def keep_everything(req: object) -> str:
    request = req  # the fold's identifiers, verbatim, so no retry is needed
    assert hasattr(request, "blocks")
    ids = [i for _, text in request.blocks for i in extract_identifiers(text)]
    return "## Facts and identifiers\n" + "\n".join(f"- {i}" for i in dict.fromkeys(ids))


@pytest.mark.parametrize("age", [200, 2000])
async def test_request_size_is_bounded_by_the_fold_not_the_ledger(age: int) -> None:
    facts = ledger(400 if age == 2000 else 40)
    previous = SummaryState(KEY, text=TOK.truncate(PREVIOUS, SUMMARY_TOKENS), folded_through=age,
                            facts=facts)
    turns = fold_at(age + 1)
    model = Scripted([keep_everything])
    s = Summarizer(model, TOK, summary_tokens=SUMMARY_TOKENS)
    known = [  # the manager offers up to 10 related long-term facts of up to 300 characters
        LongTermFact(KEY, i, f"Long-term fact {i}: " + "the refund policy changed " * 11, (i,),
                    "", False, 1e9)
        for i in range(10)
    ]
    await s.summarize(previous, turns, known_facts=known)
    assert model.done
    [(messages, _)] = model.calls
    size = request_tokens(messages)
    assert size <= fold_tokens(turns) + SUMMARY_TOKENS + MARGIN, size
    shown = parse_summary_request(messages).facts
    assert sum(TOK.count(f) + 1 for f in shown) <= CARRIED_TOKENS
    # relevant first: the two identifiers the fold mentions are shown
    assert any(f.startswith("ORD-10007 ") for f in shown)
    assert age == 200 or any(f.startswith("ORD-10391 ") for f in shown)


def test_all_400_would_have_gone_into_the_request_before() -> None:
    """The measure of the fix: showing every carried fact costs far more than the margin."""
    everything = sum(TOK.count(f"- {f.value} — {f.context}") for f in ledger(400))
    assert everything > 10 * MARGIN


def test_relevant_then_recent_within_the_budget() -> None:
    facts = ledger(400)
    chosen = facts_for_request(facts, fold_at(5000), TOK)
    values = [f.value for f in chosen]
    assert "ORD-10007" in values and "ORD-10391" in values  # mentioned in the fold
    newest = {f.value for f in sorted(facts, key=lambda f: -f.last_seen_seq)[:RECENT_FACTS]}
    assert newest & set(values)  # and some of the most recent
    assert sum(TOK.count(f"{f.value} — {f.context}") + 1 for f in chosen) <= CARRIED_TOKENS
    assert values == [f.value for f in facts if f.value in set(values)]  # ledger order


async def test_none_of_400_identifiers_is_dropped_from_the_committed_ledger(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "ledger.db", synchronous="OFF")
    await store.open()
    try:
        facts = ledger(400)
        await store.record(NewTurn(KEY, "m0", "user", "alice", "Alice", "hello", 1, 1e9))
        assert await store.commit_summary(
            KEY, expected_version=(await store.state(KEY)).version, text="## Topics\n- old",
            folded_through=1, facts=facts, now=1e9,
        )
        for t in fold_at(100):
            await store.record(NewTurn(KEY, t.message_id, "user", t.author_id, t.author_name,
                                       t.text, t.tokens, t.sent_at))
        state = await store.state(KEY, facts_limit=1000)
        pending = await store.pending(KEY)
        assert len(state.facts) == 400 and len(pending) == 12

        def drop_digits(req: object) -> str:  # loses every identifier, twice
            return "## Topics\n- Alice, Bob and Carol talked about refunds and the warehouse."

        model = Scripted([drop_digits, drop_digits])
        result = await Summarizer(model, TOK, summary_tokens=SUMMARY_TOKENS).summarize(
            state, pending
        )
        assert model.done
        assert len(result.facts) < 400  # only what changed is returned ...
        assert await store.commit_summary(
            KEY, expected_version=state.version, text=result.text,
            folded_through=pending[-1].seq, facts=result.facts, now=1e9 + 1,
        )
        after = await store.state(KEY, facts_limit=1000)
        values = {f.value for f in after.facts}
        assert {f.value for f in facts} <= values  # ... and the commit keeps all 400
        assert "INC0077812" in values  # the fold's new identifier, dropped, is carried
        refreshed = {f.value: f for f in after.facts}["ORD-10007"]
        assert refreshed.last_seen_seq == pending[6].seq  # mentioned again: moved up
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("haystack", "ident"),
    [
        ("order ORD-1042 shipped", "ORD-1042"),
        ("order ord-1042 shipped", "ORD-1042"),
        ("see HTTPS://Example.COM/a", "https://example.com/a"),
        ("ticket 10423", "1042"),
        ("the total is 12500 won", "12,500"),
        ("paid $12,500 today", "$12500"),
        ("run `make\n  test`", "make test"),
        ("ORD-7731로 환불", "ORD-7731"),
    ],
)
def test_mentioned_in_agrees_with_contains_identifier(haystack: str, ident: str) -> None:
    assert mentioned_in(haystack)(ident) is contains_identifier(haystack, ident)
