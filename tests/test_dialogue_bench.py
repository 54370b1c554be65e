"""Scenario 7 (``benchmarks.dialogue``): the generator's invariants and a tiny seeded run of
gistbot and BM25 end to end; the report's shape is checked, never its numbers."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import date

import pytest

pytest.importorskip("rank_bm25")

from benchmarks.dialogue.generate import KINDS, MEMBERS, Size, generate, resolve
from benchmarks.dialogue.scenario import PLACES, evaluate, section, shares, word_share

TINY = Size(1, 6, (10, 14), {"single": 2, "when": 2, "multi-hop": 2, "inference": 1})


@pytest.fixture(scope="module")
def quick() -> list:  # type: ignore[type-arg]
    return generate("quick", 7)


def test_generator_invariants(quick: list) -> None:  # type: ignore[type-arg]
    conv = quick[0]
    turns = conv.by_id()
    assert {q.kind for q in conv.questions} == set(KINDS)
    assert len({t.speaker for t in conv.turns}) == MEMBERS
    assert len(turns) == len(conv.turns)
    for q in conv.questions:
        assert q.evidence and all(e in turns for e in q.evidence)
        if q.kind == "multi-hop":  # two to four turns, each in its own session
            sessions = [turns[e].session for e in q.evidence]
            assert 2 <= len(q.evidence) <= 4 and len(set(sessions)) == len(sessions)
        if q.kind == "when":  # an absolute date no turn states
            assert date.fromisoformat(q.answer)
            assert not any(q.answer in t.text for t in conv.turns)
    times = [t.sent_at for t in conv.turns]
    assert times == sorted(times)


def test_generator_is_seeded(quick: list) -> None:  # type: ignore[type-arg]
    assert [asdict(c) for c in generate("quick", 7)] == [asdict(c) for c in quick]
    assert [asdict(c) for c in generate("quick", 8)] != [asdict(c) for c in quick]


def test_relative_dates_resolve_against_the_day_they_were_said() -> None:
    wednesday = date(2024, 5, 15)
    assert resolve("yesterday", wednesday) == date(2024, 5, 14)
    assert resolve("last Tuesday", wednesday) == date(2024, 5, 14)
    assert resolve("on Wednesday", wednesday) == date(2024, 5, 8)
    assert resolve("last weekend", wednesday) == date(2024, 5, 11)
    assert resolve("three days ago", wednesday) == date(2024, 5, 12)


def test_word_share_counts_content_words() -> None:
    turn_side, question_side = word_share("Which bike did Roz buy?", "Roz bought new bikes")
    assert turn_side == pytest.approx(2 / 4) and question_side == pytest.approx(2 / 3)
    assert word_share("What colour?", "Nothing in common") == (0.0, 0.0)


def test_tiny_run_reports_gistbot_and_bm25_by_kind() -> None:
    convs = generate(TINY, 3)
    budgets = [600, 1200]
    scores, facts = asyncio.run(evaluate(convs, budgets))
    sec = section(convs, scores, budgets, 1200, 600, facts, size="tiny", seed=3)
    rows = {(r["method"], r["budget"]): r for r in sec.rows}
    n = sum(len(c.questions) for c in convs)
    for method in ("gistbot", "BM25 over raw turns", "last-N window"):
        for b in budgets:
            row = rows[method, b]
            assert row["questions"] == n
            assert 0 <= row["evidence in prompt %"] <= 100
            assert all(f"evidence % {k}" in row for k in KINDS)
    for s in scores:
        if s.method == "gistbot":  # every missing evidence turn is placed somewhere
            assert sum(s.located.places.values()) >= len(s.misses)
            assert set(s.located.places) <= set(PLACES)
            assert len(s.located.candidates) == n
            # … and by kind of question, adding up to the same places
            assert sum(s.located.by_kind.values()) == sum(s.located.places.values())
            assert {k for k, _ in s.located.by_kind} <= set(KINDS)
    assert {t.name.split(":")[1].strip() for t in sec.targets} >= {
        "recall vs BM25", "within budget"}
    assert set(shares(convs)["all"]) >= {"turns", "turns sharing <= 1/3"}
    assert any("Word share" in note for note in sec.notes)


class _Words:
    """A stand-in embedding model: one dimension per word (lower-cased), normalized."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode(self, texts: list[str], **_: object) -> object:
        import numpy as np

        rows = []
        for text in texts:
            ids = [self.vocab.setdefault(w, len(self.vocab)) for w in text.lower().split()]
            rows.append(ids)
        out = np.zeros((len(texts), 4096))
        for i, ids in enumerate(rows):
            for j in ids:
                out[i, j % 4096] += 1.0
            out[i] /= max(float(np.linalg.norm(out[i])), 1e-9)
        return out


def test_dense_baseline_orders_by_similarity_within_the_budget(monkeypatch) -> None:
    # The model is benchmark-only: a word-count stand-in takes its place here.
    from benchmarks.dialogue import dense
    from benchmarks.longmem.methods import RawTurnIndex

    model = _Words()
    monkeypatch.setattr(dense, "_model", lambda: model)
    convs = generate(TINY, 3)
    conv = convs[0]
    index = dense.DenseIndex(conv, RawTurnIndex(conv))
    q = conv.questions[0]
    small = index.prompt(q, 600)
    assert small.tokens <= 600
    # The older turn most like the question (by the stand-in's vectors) is shown first.
    scores = index.vectors @ index.questions[q.id]
    best = max(range(len(conv.turns) - 4), key=lambda i: (float(scores[i]), i))
    line = f"{conv.turns[best].speaker}: {conv.turns[best].text}"
    assert line in str(small.messages[0]["content"])

    monkeypatch.setattr("benchmarks.dialogue.scenario.available", lambda: True)
    scores_, facts = asyncio.run(evaluate(convs, [600], [dense.DENSE, "BM25 over raw turns"]))
    assert facts["dense"] and {s.method for s in scores_} == {dense.DENSE, "BM25 over raw turns"}
    monkeypatch.setattr("benchmarks.dialogue.scenario.available", lambda: False)
    scores_, facts = asyncio.run(evaluate(convs, [600], [dense.DENSE, "BM25 over raw turns"]))
    assert not facts["dense"] and {s.method for s in scores_} == {"BM25 over raw turns"}
