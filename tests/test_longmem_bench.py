"""Scenario 6 (``benchmarks.longmem``): the generator's invariants, the baselines end to end
on the quick size, and one gistbot replay; numbers are checked only for sanity (BM25 must
beat the last-N window, or the data would be trivial)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import asdict
from pathlib import Path

import pytest

pytest.importorskip("rank_bm25")

from benchmarks.longmem.generate import KINDS, answer_forms, generate
from benchmarks.longmem.methods import BASELINES, RawTurnIndex, bm25_tokens
from benchmarks.longmem.scenario import evaluate


@pytest.fixture(scope="module")
def quick() -> list:  # type: ignore[type-arg]
    return generate("quick", 13)


def test_generator_invariants(quick: list) -> None:  # type: ignore[type-arg]
    assert len(quick) == 2 and sum(len(c.questions) for c in quick) == 30
    assert {c.language for c in quick} == {"en", "ko"}
    assert {q.kind for c in quick for q in c.questions} == set(KINDS)
    for conv in quick:
        turns = conv.by_id()
        assert len(turns) == len(conv.turns)  # ids unique
        assert len({q.id for q in conv.questions}) == len(conv.questions)
        for q in conv.questions:
            assert q.evidence and all(e in turns for e in q.evidence)
            assert q.answer.lower() not in q.question.lower()
            assert (len(q.evidence) == 2) == (q.kind == "two-hop")
            texts = " ".join(turns[e].text for e in q.evidence)
            if q.kind == "temporal":
                assert conv.session_dates[turns[q.evidence[0]].session] == q.answer
                assert not any(re.search(p, q.question, re.I) for p in answer_forms(q))
            else:
                assert q.answer.lower() in texts.lower()
            for e in q.evidence:  # evidence texts are unique, so text matching is exact
                assert sum(turns[e].text in t.text for t in conv.turns) == 1
        times = [t.sent_at for t in conv.turns]
        assert times == sorted(times) and times[-1] - times[0] > 60 * 86_400  # months


def test_generator_is_deterministic(quick: list) -> None:  # type: ignore[type-arg]
    again = generate("quick", 13)
    assert [asdict(c) for c in again] == [asdict(c) for c in quick]
    assert [asdict(c) for c in generate("quick", 14)] != [asdict(c) for c in quick]


def test_bm25_tokens_split_cjk_into_bigrams() -> None:
    assert bm25_tokens("Order ORD-12345 arrived") == ["order", "ord", "12345", "arrived"]
    assert bm25_tokens("강아지를 입양했어") == ["강아", "아지", "지를", "입양", "양했", "했어"]


def test_baselines_end_to_end_on_quick(quick: list) -> None:  # type: ignore[type-arg]
    scores, _ = asyncio.run(evaluate(quick, [1000, 2000], BASELINES))
    by = {(s.method, s.budget): s for s in scores}
    full = by["full history", None]
    assert full.share(2) == 1.0 and full.share(3) == 1.0  # every evidence turn, every answer
    for b in (1000, 2000):
        for m in ("last-N window", "BM25 over raw turns"):
            assert len(by[m, b].hits) == 30
            assert max(h[4] for h in by[m, b].hits) <= b
            assert by[m, b].row()["mean tokens"] > 0.85 * b  # the budget is used
        # the data is not trivial: ranking by the question beats recency
        assert by["BM25 over raw turns", b].share(2) > by["last-N window", b].share(2)
    assert by["BM25 over raw turns", 1000].share(2) < 1.0  # and not solved by BM25 either


def test_bm25_keeps_the_last_four_turns(quick: list) -> None:  # type: ignore[type-arg]
    conv = quick[0]
    index = RawTurnIndex(conv)
    text = "\n".join(m["content"] for m in index.bm25(conv.questions[0], 1000).messages)
    assert all(t.text in text for t in conv.turns[-4:])


def test_gistbot_side_asks_on_an_unchanged_state(quick: list, tmp_path: Path) -> None:  # type: ignore[type-arg]
    from benchmarks.longmem.gistbot_side import GistbotChannel
    from benchmarks.longmem.methods import memory_tokens

    conv = quick[1]  # Korean

    async def go() -> None:
        async with GistbotChannel.replay(conv, 1000, tmp_path) as ch:
            first = [await ch.ask(q) for q in conv.questions[:3]]
            again = await ch.ask(conv.questions[0])
            await ch._restore()  # the path taken when a question changed the state
            restored = await ch.ask(conv.questions[0])
        assert again == first[0] == restored  # no question leaked into the next one
        for q, messages in zip(conv.questions, first, strict=False):
            assert memory_tokens(messages) <= 1000
            assert q.question in messages[-1]["content"]  # asked as the newest turn

    asyncio.run(go())
