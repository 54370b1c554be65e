"""A seeded generator of LoCoMo-like conversations with planted facts and questions.

Each conversation is two people talking over many sessions spread across months (a session
is a sitting: 20-40 turns one evening). Most turns are filler chit-chat built from varied
templates; some are *distractors* that reuse the nouns of the questions ("my neighbour's
dog barked all night") without the answer; the rest are *evidence*: planted facts, each
stated once, whose question is paraphrased (evidence "we named him Biscuit", question "What
did Caroline call her new dog?"). Question kinds:

* ``single-hop`` — one evidence turn holds the answer;
* ``two-hop`` — two turns (possibly sessions apart) must be combined ("my sister lives in
  Lisbon" + "I'm flying out to visit my sister next month" → which city next month?);
* ``temporal`` — "When did …?": the answer is the date of the session the event was told in;
* ``identifier`` — an order number, ticket id, booking code … said once.

Conversation 1 is in Korean, conversation 5 mixed (Korean speakers switching between
Korean and English turn by turn, facts and questions in both), the others in English.
Nothing is downloaded: the same seed gives the same data (``generate(size, seed)``), so
nothing large is committed.

Invariants (checked here and in the tests): every evidence id exists; every non-temporal
answer occurs in an evidence turn and in no other turn; no question contains its answer;
evidence texts are unique in their conversation (so "is it in the prompt" can match text).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

from benchmarks.longmem import templates_en, templates_ko

__all__ = ["KINDS", "SIZES", "Conversation", "Message", "Question", "Size", "answer_forms",
           "generate"]

KINDS = ("single-hop", "two-hop", "temporal", "identifier")
LANGUAGES = {1: "ko", 5: "mixed"}  # conversation index -> language; others English
MODULES: dict[str, ModuleType] = {"en": templates_en, "ko": templates_ko}
# Lead-ins that make the two speakers' statements of the same event differ while staying one
# sentence (a sentence-level extractive summary keeps it whole, so matching text is fair).
LEADS = {"en": ["Guess what, ", "Big news: ", "So, ", "Okay, ", "Oh, and ", "Fun update: "],
         "ko": ["있잖아, ", "대박, ", "그러니까, ", "참, ", "아 맞다, "]}
ACKS = {"en": ["Congrats, that's wonderful!", "Oh wow, tell me more!", "That's amazing news.",
               "Good for you!", "Ha, love that.", "Oh nice, I'm happy for you."],
        "ko": ["축하해, 정말 잘됐다!", "우와, 더 얘기해 줘!", "대박 소식이네.", "잘됐다!",
               "좋다 ㅋㅋ"]}


@dataclass(frozen=True)
class Size:
    """How much to generate."""

    conversations: int
    sessions: tuple[int, int]  # min, max per conversation
    turns: tuple[int, int]  # min, max per session
    questions: int | None  # per conversation; None = every planted fact


SIZES = {
    "quick": Size(2, (12, 12), (20, 28), 15),
    "full": Size(10, (20, 30), (24, 40), None),
}


@dataclass(frozen=True)
class Message:
    """One turn: ``id`` is unique across the data set."""

    id: str
    speaker: str
    speaker_id: str
    text: str
    sent_at: float  # unix seconds
    session: int


@dataclass(frozen=True)
class Question:
    """A question asked after the conversation, with its answer and evidence turn ids."""

    id: str
    kind: str
    question: str
    answer: str
    evidence: tuple[str, ...]
    fact: str  # the template's name, for reading failures


@dataclass
class Conversation:
    """Two speakers, their sessions (flattened to ``turns``), the questions about them."""

    id: str
    language: str
    speakers: tuple[str, str]
    asker: tuple[str, str]  # (name, id) of who asks the questions
    turns: list[Message] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    session_dates: list[str] = field(default_factory=list)  # ISO date per session

    def by_id(self) -> dict[str, Message]:
        """Turns by message id."""
        return {t.id: t for t in self.turns}


def answer_forms(q: Question) -> list[str]:
    """Regexes that count as "the answer is in the prompt" (case-insensitive).

    Temporal answers are dates: the ISO form or day and month in any usual order
    ("14 Mar", "March 14", "3월 14일"), since each memory renders dates its own way.
    """
    if q.kind != "temporal":
        return [re.escape(q.answer)]
    d = datetime.fromisoformat(q.answer)
    day = rf"(?<!\d){d.day}"
    mon, month = d.strftime("%b"), d.strftime("%B")
    return [re.escape(q.answer), rf"{day}(st|nd|rd|th)? ({month}|{mon})\b",
            rf"\b({month}|{mon})\.? {d.day}(?!\d)", rf"(?<!\d){d.month}월 {d.day}일"]


def _fill(text: str, rng: random.Random, slots: dict[str, list[str]]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: rng.choice(slots[m.group(1)])
                  if m.group(1) in slots else m.group(0), text)


def _ident(fmt: str, rng: random.Random) -> str:
    out = []
    for ch in fmt:
        if ch == "#":
            out.append(rng.choice("0123456789"))
        elif ch == "@":
            out.append(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ"))
        else:
            out.append(ch)
    return "".join(out)


@dataclass
class _Fact:
    kind: str
    name: str
    speaker: int
    texts: list[str]  # one or two evidence texts, in order
    question: str
    answer: str  # "" for temporal until placed
    distractors: list[str]


def _lead(lead: str, text: str) -> str:
    keep = text.startswith(("I ", "I'")) or not text[:1].isascii()
    return lead + (text if keep else text[:1].lower() + text[1:])


def _facts(t: ModuleType, lang: str, names: tuple[str, str], poss: tuple[str, str],
           rng: random.Random) -> list[_Fact]:
    """Every planted fact of one conversation: each template once per speaker."""
    pools = {k: rng.sample(v, len(v)) for k, v in t.POOLS.items()}
    facts: list[_Fact] = []
    leads = {f"{kind}{k}": rng.sample(LEADS[lang], 2) for kind, n in
             (("t", len(t.TEMPORAL)), ("h", len(t.TWO_HOP))) for k in range(n)}
    for s in (0, 1):
        sub = {"S": names[s], "O": names[1 - s], "pos": poss[s]}

        def fmt(text: str, sub: dict[str, str] = sub, **more: str) -> str:
            return text.format(**(sub | more))

        for name, slot, ev, q, dis in t.SINGLE:
            x = pools[slot].pop()
            facts.append(_Fact("single-hop", name, s, [fmt(ev, x=x)], fmt(q), x, dis))
        for k, (name, ev, q, dis) in enumerate(t.TEMPORAL):
            lead = leads[f"t{k}"][s]  # different for the two speakers: unique texts
            facts.append(_Fact("temporal", name, s, [_lead(lead, fmt(ev))], fmt(q), "", dis))
        for name, form, ev, q, dis in t.IDENTIFIER:
            ident = _ident(form, rng)
            facts.append(_Fact("identifier", name, s, [fmt(ev, id=ident)], fmt(q), ident, dis))
        for k, (name, slot, ev1, ev2, q, dis) in enumerate(t.TWO_HOP):
            x = pools[slot].pop()
            lead = leads[f"h{k}"][s]
            texts = [fmt(ev1, x=x), _lead(lead, fmt(ev2))]
            facts.append(_Fact("two-hop", name, s, texts, fmt(q), x, dis))
    return facts


def _choose(facts: list[_Fact], n: int | None, rng: random.Random) -> list[_Fact]:
    """All facts, or ``n`` of them with every kind represented."""
    if n is None or n >= len(facts):
        return facts
    chosen: list[_Fact] = []
    for kind in KINDS:  # at least two of each kind
        chosen += rng.sample([f for f in facts if f.kind == kind], 2)
    rest = [f for f in facts if f not in chosen]
    return chosen + rng.sample(rest, n - len(chosen))


def _lang(module: ModuleType) -> str:
    return "ko" if module is templates_ko else "en"


def _conversation(c: int, size: Size, seed: int) -> Conversation:
    rng = random.Random(f"longmem-{seed}-{c}")
    lang = LANGUAGES.get(c, "en")
    mods = [templates_ko, templates_en] if lang == "mixed" else [MODULES[lang]]
    t = mods[0]  # names and the asker
    people = rng.sample(t.PEOPLE, 2)
    names = (people[0][0], people[1][0])
    poss = (people[0][1] or "their", people[1][1] or "their")
    facts = [f for m in mods for f in _facts(m, _lang(m), names, poss, rng)]
    if len(mods) > 1:  # one fact per (speaker, kind of fact), in one of the languages
        rng.shuffle(facts)
        seen: set[tuple[int, str]] = set()
        facts = [f for f in facts if (f.speaker, f.name) not in seen
                 and not seen.add((f.speaker, f.name))]  # type: ignore[func-returns-value]
    facts = _choose(facts, size.questions, rng)
    n_sessions = rng.randint(*size.sessions)
    lengths = [rng.randint(*size.turns) for _ in range(n_sessions)]
    # Place evidence: session per text (two-hop: first text in an earlier or the same
    # session, second later), then a free slot of the right speaker in that session.
    plan: dict[int, list[tuple[int, str, _Fact]]] = {s: [] for s in range(n_sessions)}
    for f in facts:
        if len(f.texts) == 2:
            a = rng.randrange(n_sessions - 1)
            sessions = [a, rng.randrange(a + 1, n_sessions)]
        else:
            sessions = [rng.randrange(n_sessions)]
        for s, text in zip(sessions, f.texts, strict=True):
            plan[s].append((f.speaker, text, f))
    distractors = [d for f in facts for d in f.distractors]
    conv = Conversation(id=f"c{c:02d}", language=lang, speakers=names, asker=t.ASKER)
    day = datetime(2023, 1, 9, tzinfo=UTC) + timedelta(days=23 * c)
    placed: dict[int, list[str]] = {}  # id(fact) -> message ids
    fact_date: dict[int, str] = {}
    for s in range(n_sessions):
        day += timedelta(days=rng.randint(3, 16))
        start = day.replace(hour=rng.randint(8, 21), minute=rng.choice((0, 15, 30, 45)))
        conv.session_dates.append(start.date().isoformat())
        n = max(lengths[s], 2 * len(plan[s]) + 4)
        first = rng.randrange(2)
        who = [(first + i) % 2 for i in range(n)]
        free = {0: [i for i in range(1, n) if who[i] == 0], 1: [i for i in range(1, n)
                                                                if who[i] == 1]}
        for v in free.values():
            rng.shuffle(v)
        at: dict[int, tuple[str, _Fact]] = {}
        for spk, text, f in plan[s]:
            if not free[spk]:  # a crowded session: append turns for this speaker
                who += [1 - spk, spk]
                free[spk].append(len(who) - 1)
            at[free[spk].pop()] = (text, f)
        for i, spk in enumerate(who):
            tm = rng.choice(mods)  # a mixed conversation switches language turn by turn
            mid = f"{conv.id}s{s:02d}t{i:02d}"
            if i in at:
                text, f = at[i]
                placed.setdefault(id(f), []).append(mid)
                fact_date.setdefault(id(f), conv.session_dates[-1])
            elif i == 0:
                text = _fill(rng.choice(tm.GREETINGS), rng, {"O": [names[1 - spk]]})
            elif i - 1 in at and rng.random() < 0.6:
                text = rng.choice(ACKS[_lang(tm)])
            elif rng.random() < 0.22:
                text = rng.choice(distractors)
            else:
                parts = rng.sample(tm.FILLER, rng.choice((1, 2, 3, 3, 4)))
                body = " ".join(_fill(part, rng, tm.SLOTS) for part in parts)
                lead = rng.choice(tm.REACTIONS) if rng.random() < 0.45 else ""
                text = f"{lead}{'!' if lead else ''} {body}".strip()
            sent = start + timedelta(seconds=40 * i)
            conv.turns.append(Message(mid, names[spk], f"U-{conv.id}-{spk}", text,
                                      sent.timestamp(), s))
    for k, f in enumerate(facts):
        answer = f.answer or fact_date[id(f)]
        conv.questions.append(Question(f"{conv.id}q{k:03d}", f.kind, f.question, answer,
                                       tuple(placed[id(f)]), f.name))
    check(conv)
    return conv


def check(conv: Conversation) -> None:
    """Raise ``AssertionError`` when an invariant of the module docstring does not hold."""
    turns = conv.by_id()
    evidence_ids = {e for q in conv.questions for e in q.evidence}
    texts = [t.text for t in conv.turns]
    for q in conv.questions:
        assert q.evidence and all(e in turns for e in q.evidence), q
        assert q.answer.lower() not in q.question.lower(), q
        if q.kind == "temporal":
            assert conv.session_dates[turns[q.evidence[0]].session] == q.answer, q
            continue
        pat = re.compile(r"(?<![A-Za-z0-9])" + re.escape(q.answer) + r"(?![A-Za-z0-9])",
                         re.IGNORECASE)
        if not q.answer.isascii():  # Korean: particles attach to the word, no boundary
            pat = re.compile(re.escape(q.answer))
        assert any(pat.search(turns[e].text) for e in q.evidence), q
        others = [t.id for t in conv.turns if t.id not in q.evidence and pat.search(t.text)]
        assert not others, (q, others)
    for e in evidence_ids:
        text = turns[e].text
        assert sum(text in other for other in texts) == 1, f"evidence text not unique: {text}"


def generate(size: str | Size = "full", seed: int = 13) -> list[Conversation]:
    """The conversations of ``size`` ("quick", "full" or a ``Size``), same for a seed."""
    spec = SIZES[size] if isinstance(size, str) else size
    return [_conversation(c, spec, seed) for c in range(spec.conversations)]


def to_json(conv: Conversation) -> dict[str, Any]:
    """A JSON-able dict (for inspection: ``python -m benchmarks.longmem --dump FILE``)."""
    from dataclasses import asdict

    return asdict(conv)
