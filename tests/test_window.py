"""Window invariants, as hypothesis properties.

``build_view``: for any turns, summary, facts and budget, the view fits the budget, keeps
the order, holds a suffix of the turns (the newest), cuts an oversized turn only with a
marker, and does not leave room unused while older turns wait. ``fold_count``: folds
nothing under the trigger, at least one turn over it, and down to the keep target
(hysteresis) unless the per-call bound stops it first.

Most properties use a one-character-one-token tokenizer so huge turns cost nothing to
generate; one property repeats the budget checks with the real o200k tokenizer on CJK and
emoji text.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.models import CarriedIdentifier, ChannelKey, MemoryView, SummaryState, Turn
from memory.tokens import TokenCounter, Tokenizer
from memory.window import FOLD_TURN_OVERHEAD, WindowPolicy, build_view, truncate_marked, turn_cost

KEY = ChannelKey("discord", "g", "c")


class CharTokenizer:
    """One character, one token: exact and cheap, so properties can use huge texts."""

    def count(self, text: str) -> int:
        return len(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return text[: max(max_tokens, 0)]


CHARS = CharTokenizer()


def make_turns(sizes: list[int], tokenizer: Tokenizer = CHARS, first_seq: int = 1) -> list[Turn]:
    out = []
    for i, size in enumerate(sizes):
        text = (f"t{i} " + "abcdefghij" * (size // 10 + 1))[:size]
        out.append(Turn(KEY, first_seq + i, f"m{i}", "user", "u", "U", text,
                        tokenizer.count(text), float(i)))
    return out


def is_marked_cut(original: str, shown: str) -> bool:
    """``shown`` is ``original`` cut with the truncation marker (or only the marker, cut)."""
    head, sep, _ = shown.partition(" […truncated, ")
    if sep:
        return original.startswith(head) and shown.endswith(" tokens in full]")
    return "[…truncated,".startswith(shown[:12]) and len(shown) < 50


# sizes: mostly small, sometimes huge (a pasted log), sometimes empty
SIZES = st.one_of(
    st.integers(0, 40), st.integers(0, 400), st.integers(5_000, 200_000)
)
FACTS = st.lists(
    st.tuples(st.sampled_from(["ORD-1", "ORD-22", "#4411", "https://x.example/a", "`fox`",
                               "12,500", "010-1234-5678", "INC0012345"]),
              st.text(max_size=60)),
    max_size=8,
    unique_by=lambda f: f[0],
)


@dataclass
class ViewCase:
    state: SummaryState
    turns: list[Turn]
    budget: int
    facts_budget: int
    share: float


@st.composite
def view_cases(draw: st.DrawFn) -> ViewCase:
    turns = make_turns(draw(st.lists(SIZES, max_size=40)), first_seq=draw(st.integers(1, 10**6)))
    summary = "S" * draw(st.one_of(st.just(0), st.integers(0, 300), st.integers(0, 20_000)))
    if draw(st.booleans()):
        summary += " mentions ORD-1"
    facts = tuple(CarriedIdentifier(v, c, 1, 100 - i) for i, (v, c) in enumerate(draw(FACTS)))
    state = SummaryState(KEY, summary, version=3, folded_through=0, facts=facts)
    return ViewCase(
        state,
        turns,
        budget=draw(st.one_of(st.integers(0, 64), st.integers(0, 5_000), st.integers(0, 300_000))),
        facts_budget=draw(st.integers(0, 600)),
        share=draw(st.sampled_from([0.1, 0.25, 0.5, 0.9, 1.0])),
    )


def check_view(case: ViewCase, view: MemoryView, tokenizer: Tokenizer) -> None:
    budget = max(case.budget, 0)
    # 1. the view never exceeds its budget, and reports its size honestly
    assert view.tokens <= budget
    assert view.summary_tokens == tokenizer.count(view.summary)
    assert view.turns_tokens == sum(turn_cost(t, tokenizer) for t in view.turns)
    assert all(t.tokens == tokenizer.count(t.text) for t in view.turns)
    assert view.facts_tokens <= case.facts_budget
    assert view.version == case.state.version and view.key == case.state.key

    # 2. the summary comes whole when it fits, else cut with a marker
    if tokenizer.count(case.state.text) <= budget:
        assert view.summary == case.state.text
    else:
        assert is_marked_cut(case.state.text, view.summary)

    # 3. facts: a subset in the stored order, none repeating what the summary says
    values = [f.value for f in case.state.facts]
    shown = [f.value for f in view.facts]
    assert shown == [v for v in values if v in shown]
    assert not any(v in view.summary for v in shown)

    # 4. turns: the newest ones, in order, a turn changed only by a marked cut
    n = len(view.turns)
    suffix = case.turns[len(case.turns) - n:] if n else []
    assert [t.seq for t in view.turns] == [t.seq for t in suffix]
    for shown_turn, original in zip(view.turns, suffix, strict=True):
        if shown_turn.text != original.text:
            assert view.truncated
            assert is_marked_cut(original.text, shown_turn.text)
            assert shown_turn.tokens <= max(int(budget * case.share), 1) or n == 1
        else:
            assert shown_turn == original
    assert view.dropped == len(case.turns) - n

    # 5. no room wasted: an older turn is left out only when it could not fit
    nxt = case.turns[len(case.turns) - n - 1] if len(case.turns) > n else None
    overhead = turn_cost(nxt, tokenizer) - nxt.tokens if nxt is not None else 0
    room = budget - view.summary_tokens - view.facts_tokens - view.turns_tokens - overhead
    if case.turns and n == 0:
        assert room <= 0
    if view.dropped:
        older = case.turns[len(case.turns) - n - 1]
        cap = max(int(budget * case.share), 1)
        assert room <= 0 or (older.tokens <= cap and older.tokens > room)


@settings(max_examples=400, deadline=None)
@given(view_cases())
def test_view_fits_budget_and_keeps_the_newest_turns(case: ViewCase) -> None:
    view = build_view(case.state, case.turns, budget=case.budget, tokenizer=CHARS,
                      facts_budget=case.facts_budget, max_turn_share=case.share)
    check_view(case, view, CHARS)


_PIECES = [*"가나다라마바사한국어 ", *"日本語です。", *"abc XYZ 123 .,!?\n", "🚀", "🔥",
           "👨\u200d👩\u200d👧", "안녕하세요", "ORD-7731", "https://x.example/a"]
CJK_TEXT = st.lists(st.sampled_from(_PIECES), max_size=200).map("".join)


@pytest.fixture(scope="module")
def o200k() -> TokenCounter:
    return TokenCounter("gpt-4o")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.one_of(CJK_TEXT, CJK_TEXT.map(lambda t: t * 40)), max_size=12),
    summary=CJK_TEXT,
    budget=st.integers(0, 3000),
    share=st.sampled_from([0.2, 0.5, 1.0]),
)
def test_view_fits_budget_with_the_real_tokenizer(
    o200k: TokenCounter, texts: list[str], summary: str, budget: int, share: float
) -> None:
    turns = [Turn(KEY, i + 1, f"m{i}", "user", "u", "U", t, o200k.count(t), 0.0)
             for i, t in enumerate(texts)]
    case = ViewCase(SummaryState(KEY, summary), turns, budget, 100, share)
    view = build_view(case.state, turns, budget=budget, tokenizer=o200k, facts_budget=100,
                      max_turn_share=share)
    assert view.tokens <= budget
    n = len(view.turns)
    assert [t.seq for t in view.turns] == [t.seq for t in turns[len(turns) - n:]]
    assert view.dropped == len(turns) - n
    for shown, original in zip(view.turns, turns[len(turns) - n:], strict=True):
        assert shown.text == original.text or view.truncated
        assert shown.tokens == o200k.count(shown.text)
    if turns and n == 0:
        overhead = turn_cost(turns[-1], o200k) - turns[-1].tokens
        assert budget - view.summary_tokens - view.facts_tokens - overhead <= 0


def test_truncate_marked_says_how_much_was_left_out(o200k: TokenCounter) -> None:
    text = "로그 라인 " * 2000
    cut = truncate_marked(text, 50, o200k)
    assert o200k.count(cut) <= 50
    assert cut.endswith(f" […truncated, {o200k.count(text)} tokens in full]")
    assert text.startswith(cut.partition(" […truncated")[0])
    assert truncate_marked("short", 50, o200k) == "short"


def test_an_oversized_turn_is_cut_not_dropped() -> None:
    turns = make_turns([10, 50_000])
    view = build_view(SummaryState(KEY), turns, budget=1000, tokenizer=CHARS, facts_budget=0)
    assert view.truncated
    assert [t.seq for t in view.turns] == [1, 2]
    assert view.turns[1].text.endswith("tokens in full]")
    assert view.turns[1].tokens <= 500


def test_lagging_compaction_drops_the_oldest_from_the_prompt_only() -> None:
    turns = make_turns([100] * 30)
    view = build_view(SummaryState(KEY, "S" * 100), turns, budget=1000, tokenizer=CHARS,
                      facts_budget=0)
    assert view.dropped == 30 - len(view.turns) > 0
    assert view.turns == tuple(turns[-len(view.turns):])


# ----------------------------------------------------------------------------- fold_count


@st.composite
def policies(draw: st.DrawFn) -> WindowPolicy:
    max_messages = draw(st.integers(1, 30))
    keep = draw(st.integers(0, max_messages - 1))
    window = draw(st.one_of(st.just(0), st.integers(1, 3000)))
    keep_tokens = draw(st.integers(0, window - 1)) if window else draw(st.integers(0, 100))
    return WindowPolicy(max_messages, keep, window, keep_tokens,
                        max_fold_tokens=draw(st.one_of(st.just(8000), st.integers(1, 3000))))


@settings(max_examples=1000, deadline=None)
@given(policy=policies(), sizes=st.lists(st.one_of(st.integers(0, 50), st.integers(0, 5000)),
                                         max_size=60))
def test_fold_count_hysteresis(policy: WindowPolicy, sizes: list[int]) -> None:
    pending = [Turn(KEY, i + 1, f"m{i}", "user", "u", "U", "", s, 0.0)
               for i, s in enumerate(sizes)]
    n = policy.fold_count(pending)
    over = policy.should_compact(len(pending), sum(sizes))
    if not over:
        assert n == 0
        return
    assert 1 <= n <= len(pending)  # over the trigger: progress is guaranteed
    kept = sizes[n:]
    cost = [s + FOLD_TURN_OVERHEAD for s in sizes]  # each with its label
    assert sum(cost[:n]) <= policy.max_fold_tokens or n == 1  # one call's input is bounded
    stopped_by_bound = n < len(sizes) and sum(cost[: n + 1]) > policy.max_fold_tokens
    if not stopped_by_bound:
        # folded down to the keep target, so the next compaction needs new turns
        assert len(kept) <= policy.keep_messages
        if policy.window_tokens:
            assert sum(kept) <= (policy.keep_tokens or max(policy.window_tokens // 2, 1))
        assert not policy.should_compact(len(kept), sum(kept))


def test_token_window_without_keep_tokens_still_folds() -> None:
    """WINDOW_TOKENS set, KEEP_TOKENS left at 0 (the settings default): two big turns over
    the token window must fold something, or the compaction loop would spin forever."""
    policy = WindowPolicy(max_messages=10, keep_messages=4, window_tokens=100)
    pending = [Turn(KEY, i, f"m{i}", "user", "u", "U", "", 80, 0.0) for i in (1, 2)]
    assert policy.should_compact(2, 160)
    n = policy.fold_count(pending)
    assert n >= 1
    assert not policy.should_compact(2 - n, 80 * (2 - n))


def test_default_policy_folds_seven_of_eleven() -> None:
    pending = make_turns([5] * 11)
    assert WindowPolicy().fold_count(pending) == 7
    assert WindowPolicy().fold_count(pending[:10]) == 0


def test_invalid_policies_are_refused() -> None:
    for kw in ({"max_messages": 4, "keep_messages": 4}, {"max_messages": 0},
               {"keep_messages": -1}, {"window_tokens": 100, "keep_tokens": 100}):
        with pytest.raises(ValueError):
            WindowPolicy(**kw)  # type: ignore[arg-type]
