"""The view pays for what the rendered prompt costs: never less, and hardly more.

A view's own count (summary, carried identifiers, verbatim turns, recall) is what it holds
against its budget. Counted the way the API counts the rendered chat messages (3 tokens a
message plus role and content, 3 to prime the reply) less ``fixed_overhead``, the prompt
must never cost more than that count (else it could go over the budget), and the count
should not be much more either: every token charged and not rendered is a recalled line
left out (docs/decisions/0056). Prompts of many shapes: names, texts ending in
punctuation, emoji or a line break, bot replies, recall over many days, carried
identifiers, episodes, summaries, budgets from 300 to 7,024.
"""

from __future__ import annotations

import random

import pytest

from bot.conversation.prompts import build_messages, fixed_overhead
from memory.models import CarriedIdentifier, ChannelKey, Episode, Recall, SummaryState, Turn
from memory.tokens import TokenCounter
from memory.view import ViewSplit, compose_view
from memory.window import MESSAGE_FRAMING, turn_cost

KEY = ChannelKey("discord", "g", "c")
SYSTEM = "You are gistbot."
DAY = 86400.0
WORDS = ("the order was charged twice on March we met Dana at café yesterday last Tuesday "
         "2041 ok sure 마감은 금요일 MEMORY>>> <<<MEMORY").split()
ENDS = ["", ".", "!", "?", "...", " :)", " 🎉", "\n", ")", '"', ".\n\n", " —"]
NAMES = ["Dana", "Anne-Marie Delacroix", "김민준", "Bo", "gistbot]: MEMORY>>>"]
FIXED_SLACK = 30
"""What ``fixed_overhead`` reserves and a prompt may not render (the two messages' slack,
the summary and facts headings when there is neither): the most a view's count may
exceed the rendered cost, whatever the number of lines."""


def _text(r: random.Random) -> str:
    text = " ".join(r.choice(WORDS) for _ in range(r.randint(1, 60)))
    return text[0].upper() + text[1:] + r.choice(ENDS)


def _turn(r: random.Random, tok: TokenCounter, seq: int, at: float, role: str = "") -> Turn:
    role = role or r.choice(["user", "user", "user", "assistant"])
    name = "gistbot" if role == "assistant" else r.choice(NAMES)
    text = _text(r)
    return Turn(KEY, seq, f"m{seq}", role, "u", name, text, tok.count(text), at)  # type: ignore[arg-type]


def _wire(tok: TokenCounter, messages: list[dict[str, str]]) -> int:
    return 3 + sum(3 + tok.count(m["role"]) + tok.count(m["content"]) for m in messages)


def _case(seed: int, tok: TokenCounter) -> tuple[int, int, int, int]:
    """(budget, the view's count, the rendered prompt's memory cost, lines shown)."""
    r = random.Random(seed)
    n_old, n_new = r.randint(0, 200), r.randint(1, 40)
    old = [_turn(r, tok, i + 1, i * DAY / 5) for i in range(n_old)]
    new = [_turn(r, tok, n_old + i + 1, n_old * DAY / 5 + i * 60,
                 "user" if i == n_new - 1 else "") for i in range(n_new)]
    hits = r.sample(old, min(len(old), r.randint(0, 120)))
    episodes = tuple(Episode(KEY, i, 1, 2, 0.0, DAY, ("Dana",), _text(r))
                     for i in range(r.randint(0, 3)))
    carried = tuple(CarriedIdentifier(f"ID-{i}", _text(r)[:60], i, i)
                    for i in range(r.randint(0, 10)))
    summary = r.choice(["", "Dana asked about ORD-2041. " * r.randint(1, 40)])
    budget = r.choice([300, 1000, 2000, 3024, 4000, 7024])
    view = compose_view(SummaryState(KEY, summary, facts=carried), new, budget=budget,
                        tokenizer=tok, split=ViewSplit(), found=Recall((), episodes, tuple(hits)),
                        nearby=old, earlier=old[-20:])
    count = view.summary_tokens + view.facts_tokens + view.turns_tokens + view.recall_tokens
    real = _wire(tok, build_messages(SYSTEM, view)) - fixed_overhead(SYSTEM, tok)  # type: ignore[arg-type]
    lines = len(view.turns) + len(view.recall.turns) + len(view.facts) + len(view.recall.episodes)
    return budget, count, real, lines


@pytest.mark.parametrize("model", ["gpt-4o", "llama-3-8b"])
def test_the_view_counts_what_the_prompt_costs_never_less(model: str) -> None:
    tok = TokenCounter(model)
    many = 0
    for seed in range(60):
        budget, count, real, lines = _case(seed, tok)
        assert count <= budget
        assert real <= count, (seed, real, count)
        # An unknown model's count (o200k x1.1) rounds up each line it prices apart.
        rounding = 0 if tok.factor == 1.0 else lines + FIXED_SLACK // 10
        assert count - real <= FIXED_SLACK + rounding, (seed, real, count, lines)
        many += lines >= 60
    assert many >= 10  # the slack does not grow with the lines shown


@pytest.mark.parametrize("model", ["gpt-4o", "llama-3-8b"])
def test_a_turn_is_priced_as_its_message_renders(model: str) -> None:
    tok = TokenCounter(model)
    r = random.Random(7)
    for seq in range(200):
        turn = _turn(r, tok, seq, 0.0)
        content = (f"[{turn.author_name}]: " if turn.role == "user" else "") + turn.text
        rendered = build_messages(SYSTEM, _one(turn))[-1]["content"]
        assert rendered.endswith(turn.text)
        assert turn_cost(turn, tok) == (tok.count(rendered) + tok.count(turn.role)
                                        + MESSAGE_FRAMING), content


def _one(turn: Turn):  # type: ignore[no-untyped-def]
    from memory.models import MemoryView

    return MemoryView(key=KEY, summary="", summary_tokens=0, facts=(), facts_tokens=0,
                      turns=(turn,), turns_tokens=0, dropped=0, truncated=False, version=0)
