"""The budget-derived defaults: the compaction window and the view split follow
``CONTEXT_TOKENS``; ``MAX_HISTORY_MESSAGES`` / ``KEEP_RECENT_MESSAGES`` select the original
sliding window; ``WINDOW_TOKENS`` / ``KEEP_TOKENS`` set a token window explicitly."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.app import Runtime
from bot.conversation.budget import Budget, window_policy
from bot.errors import ConfigError
from bot.messages import IncomingMessage
from bot.settings import Settings, load_settings
from memory.ledger import facts_for_request
from memory.models import CarriedIdentifier, ChannelKey, Turn
from memory.summarizer import (
    ARCHIVE_TOKENS,
    KNOWN_TOKENS,
    answer_room,
    build_summary_request,
)
from memory.tokens import TokenCounter
from memory.window import FOLD_TURN_OVERHEAD, WindowPolicy
from tests.harness.chat import ask

TOK = TokenCounter("gpt-4o")
KEY = ChannelKey("console", "local", "budget")


def budget_of(settings: Settings) -> Budget:
    return Budget.compute(settings.budget, settings.chat.system_prompt, TOK)


def policy_of(env: dict[str, str]) -> WindowPolicy:
    settings = load_settings(env)
    return window_policy(settings.memory, budget_of(settings))


def test_the_default_window_is_in_tokens_and_grows_with_the_budget() -> None:
    small = policy_of({"CONTEXT_TOKENS": "4096", "REPLY_TOKENS": "512"})
    large = policy_of({"CONTEXT_TOKENS": "32000"})
    assert small.max_messages == 0 and large.max_messages == 0  # no message count limit
    assert 0 < small.keep_tokens < small.window_tokens < large.window_tokens
    budget = budget_of(load_settings({})).memory_tokens
    default = policy_of({})
    assert default.window_tokens == int((budget - 600) * 0.45)


def test_the_message_window_is_still_there_when_asked_for() -> None:
    policy = policy_of({"MAX_HISTORY_MESSAGES": "10"})
    assert (policy.max_messages, policy.keep_messages, policy.window_tokens) == (10, 4, 0)
    policy = policy_of({"KEEP_RECENT_MESSAGES": "2"})
    assert (policy.max_messages, policy.keep_messages) == (10, 2)
    with pytest.raises(ConfigError, match="KEEP_RECENT_MESSAGES"):
        load_settings({"MAX_HISTORY_MESSAGES": "5", "KEEP_RECENT_MESSAGES": "5"})


def test_an_explicit_token_window_overrides_the_derived_one() -> None:
    policy = policy_of({"WINDOW_TOKENS": "900", "KEEP_TOKENS": "300"})
    assert (policy.max_messages, policy.window_tokens, policy.keep_tokens) == (0, 900, 300)


def test_recall_tokens_unset_zero_or_a_cap() -> None:
    assert load_settings({}).memory.split.recall_tokens is None
    assert load_settings({"RECALL_TOKENS": "0"}).memory.split.recall_tokens == 0
    assert load_settings({"RECALL_TOKENS": "700"}).memory.split.recall_tokens == 700


@given(st.lists(st.integers(1, 400), min_size=1, max_size=80), st.integers(200, 20000))
def test_a_token_window_folds_down_to_its_target_and_never_spins(
    sizes: list[int], budget: int
) -> None:
    policy = WindowPolicy.for_budget(budget, summary_tokens=100)
    turns = [Turn(KEY, i + 1, f"m{i}", "user", "u", "U", "x", n, 0.0) for i, n in enumerate(sizes)]
    n = policy.fold_count(turns)
    if sum(sizes) <= policy.window_tokens:
        assert n == 0
    else:
        assert n >= 1  # progress, always
        folded, kept = sum(sizes[:n]), sum(sizes[n:])
        # Down to the keep target, unless the per-call bound stopped the fold first.
        labels = FOLD_TURN_OVERHEAD * (n + 1)
        assert kept <= policy.keep_tokens or folded + sizes[n] + labels > policy.max_fold_tokens


async def test_one_summary_call_folds_many_turns_by_default(tmp_path: Path) -> None:
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/b.db"})
    async with Runtime.open(settings) as rt:
        for i in range(600):
            text = f"message {i}: we talked about the parcel to depot {i} and lunch plans"
            await ask(rt, IncomingMessage(KEY, f"m{i}", "u1", "Dana", text, 1e9 + i))
            await rt.memory.wait_idle()
        state = await rt.store.state(KEY)
    assert state.folded_through > 300
    assert state.compactions <= 600 * 20 // 1000  # tens of turns per call, not 7


@pytest.mark.parametrize("env", [{"CONTEXT_TOKENS": "2048"}, {"CONTEXT_TOKENS": "2048",
                                 "MAX_HISTORY_MESSAGES": "10", "KEEP_RECENT_MESSAGES": "4"}])
def test_a_fold_after_many_failed_summaries_fits_the_context(env: dict[str, str]) -> None:
    """A backlog of ~5,700 tokens (compaction failed or was preempted for a long while)
    is folded in calls whose whole request, with everything else a request may show and
    the answer it asks for, fits ``CONTEXT_TOKENS``; each call still folds something."""
    settings = load_settings(env)
    policy, bound = policy_of(env), settings.budget.summary_bound
    line = "the deploy of service alpha moved to thursday because staging broke again; "
    turns = [Turn(KEY, i + 1, f"m{i}", "user", f"u{i % 4}", f"Person{i % 4}",
                  f"{i}: " + line * 5, TOK.count(f"{i}: " + line * 5), 0.0) for i in range(80)]
    assert sum(t.tokens for t in turns) > 5_600
    n = policy.fold_count(turns)
    assert 1 <= n < len(turns)
    previous = TOK.truncate("summary words, " * 400, bound)
    carried = [CarriedIdentifier(f"ORD-{1000 + i}", f"{i}: " + line, 1, i) for i in range(60)]
    known = [(i, f"fact {i}: " + line) for i in range(30)]
    shown, used = [], 0  # the known facts a request shows (``KNOWN_TOKENS``)
    for i, text in known:
        used += TOK.count(text) + 4
        if used > KNOWN_TOKENS:
            break
        shown.append((i, text))
    request = build_summary_request(
        previous, facts_for_request(carried, turns[:n], TOK), turns[:n], max_tokens=bound,
        archive=True, known_facts=shown, language="Portuguese")
    size = sum(TOK.count(m["content"]) + 4 for m in request)
    assert size + answer_room(bound) + ARCHIVE_TOKENS <= settings.budget.context_tokens, size
