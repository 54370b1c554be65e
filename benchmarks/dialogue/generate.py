"""A seeded generator of group conversations as hard as real multi-session dialogue.

Four friends talk in one channel over many dated sessions (an evening each, weeks apart).
They call each other by nickname ("Roz") and pronoun, and talk about relatives and friends
by nickname; the questions, asked a day after the last session by someone outside the
group, use full names ("Rosalind") and other words than the turns that answer them
(``words``: synonyms, other inflections, paraphrase). Kinds of question:

* ``single`` — one fact stated once (by its subject, or by a friend about them; when a
  friend says "she", the turn naming her is evidence too);
* ``when`` — an event told with a relative time ("last Tuesday", "the day before
  yesterday", "two weeks before the trip"): the answer is the absolute date, which only the
  session's date (and, for a trip, the turn that dates the trip) resolves;
* ``multi-hop`` — a chain of two to four turns in different sessions (my cousin is Gus →
  Gus opened a bakery → the bakery is on Ropewalk), every one needed;
* ``inference`` — the answer is not said; a turn implies it ("two EpiPens" → no satay).

Between them: small talk, long rambling turns, distractors that share the questions'
nouns, and the same kind of fact about another friend with another value. Nothing is
downloaded; ``generate(size, seed)`` gives the same data for a seed.

Invariants (``check``): evidence ids exist; every answer but a date or an inference is in
an evidence turn and in no other turn; no question holds its answer; evidence texts are
unique (so "is it in the prompt" matches text).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from benchmarks.dialogue import words as W
from benchmarks.longmem.generate import Conversation, Message, Question

__all__ = ["KINDS", "SIZES", "Size", "check", "generate", "resolve"]

KINDS = ("single", "when", "multi-hop", "inference")
MEMBERS = 4
"""People in each group chat."""
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


@dataclass(frozen=True)
class Size:
    """How much to generate: conversations, sessions each, turns per session, questions
    per kind per conversation."""

    conversations: int
    sessions: int
    turns: tuple[int, int]
    questions: dict[str, int]


SIZES = {
    "quick": Size(1, 9, (14, 20), {"single": 4, "when": 3, "multi-hop": 3, "inference": 2}),
    "full": Size(6, 24, (21, 32), {"single": 18, "when": 12, "multi-hop": 14, "inference": 8}),
}


def resolve(phrase: str, said_on: date) -> date:
    """The date a relative time said on ``said_on`` means: "yesterday", "the day before
    yesterday", "N days ago", "a week ago", "two weeks ago", "last <weekday>" / "on
    <weekday>" (the most recent such day before ``said_on``), "last weekend" (the
    Saturday before)."""
    p = phrase.lower().removeprefix("on ")
    numbers = {"two": 2, "three": 3, "four": 4, "five": 5}
    if p == "yesterday":
        return said_on - timedelta(days=1)
    if p == "the day before yesterday":
        return said_on - timedelta(days=2)
    if p == "a week ago":
        return said_on - timedelta(days=7)
    if p == "two weeks ago":
        return said_on - timedelta(days=14)
    m = re.fullmatch(r"(\w+) days ago", p)
    if m:
        return said_on - timedelta(days=numbers[m.group(1)])
    day = 5 if p == "last weekend" else _DAYS.index(p.removeprefix("last ").capitalize())
    back = (said_on.weekday() - day) % 7 or 7
    return said_on - timedelta(days=back)


_PHRASES = ["yesterday", "the day before yesterday", "three days ago", "four days ago",
            "a week ago", "two weeks ago", "last weekend",
            *(f"last {d}" for d in _DAYS), *(f"on {d}" for d in _DAYS)]


@dataclass
class _Person:
    full: str
    nick: str
    he: str
    him: str
    his: str

    def sub(self, suffix: str = "") -> dict[str, str]:
        return {f"N{suffix}": self.nick, f"F{suffix}": self.full, f"he{suffix}": self.he,
                f"him{suffix}": self.him, f"his{suffix}": self.his,
                f"He{suffix}": self.he.capitalize(), f"His{suffix}": self.his.capitalize()}


@dataclass
class _Text:
    """One turn to place: its text, who says it, the session it must go to (or after)."""

    text: str
    speaker: int
    lead: str = ""  # a turn placed right before it (a pronoun's antecedent), or ""
    lead_speaker: int = 0


@dataclass
class _Fact:
    kind: str
    name: str
    texts: list[_Text]
    question: str
    answer: str  # "" for when-questions until placed
    sessions: list[int]
    when: tuple[str, int] | None = None  # (phrase, days before the trip) for when-questions
    trip: date | None = None  # the trip's date, when the phrase counts from a trip


def _question(rng: random.Random, questions: list[str]) -> str:
    """One of a fact's questions: the last (which shares a word with the evidence) as
    often as all the others together, as real questions often reuse one word."""
    return questions[-1] if rng.random() < 0.5 else rng.choice(questions[:-1])


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


_TEMPLATES = "\n".join(_strings([W.SINGLE, W.WHEN, W.CHAIN, W.INFER, W.TALK, W.TALK_SLOTS,
                                 W.LEADS, W.GREETINGS, W.ACKS, W.REACTS])).lower()


def _usable(values: list[str]) -> list[str]:
    """The pool values no template says (an answer must be said once, by its fact)."""
    return [v for v in values
            if not re.search(r"(?<![a-z0-9])" + re.escape(v.lower()) + r"(?![a-z0-9])",
                             _TEMPLATES)]


def _pronoun(text: str) -> str:
    """A friend's sentence about ``{N}`` with the name made a pronoun ("she fractured …")."""
    if text.startswith("{N}'s"):
        return "{His}" + text[5:]
    if text.startswith("{N}"):
        return "{He}" + text[3:]
    return text.replace("{N}'s", "{his}", 1).replace("{N}", "{he}", 1)


def _fmt(text: str, sub: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: sub.get(m.group(1), m.group(0)), text)


class _World:
    """One conversation's people, pools and planted facts."""

    def __init__(self, rng: random.Random, size: Size, dates: list[date]) -> None:
        self.rng = rng
        self.members = [_Person(*p) for p in rng.sample(W.MEMBERS, MEMBERS)]
        self.others = [_Person(*p) for p in rng.sample(W.OTHERS, len(W.OTHERS))]
        self.pools = {k: rng.sample(_usable(v), len(_usable(v))) for k, v in W.POOLS.items()}
        self.size = size
        self.dates = dates
        self.n_sessions = len(dates)
        self.facts: list[_Fact] = []
        self.bait: list[tuple[str, int]] = []  # distractor lines, speaker
        self.leads: set[str] = set()

    def _lead(self, nick: str) -> str:
        """A turn that names ``nick`` before a friend's "she …", unique in the chat."""
        options = [x.format(nick) for x in W.LEADS if x.format(nick) not in self.leads]
        lead = self.rng.choice(options)
        self.leads.add(lead)
        return lead

    def _other(self, s: int) -> int:
        return self.rng.choice([k for k in range(MEMBERS) if k != s])

    def _sessions(self, k: int) -> list[int]:
        """``k`` distinct sessions, ascending, spread over the conversation."""
        return sorted(self.rng.sample(range(self.n_sessions), k))

    def singles(self, n: int) -> None:
        combos = [(t, s) for t in W.SINGLE for s in range(MEMBERS)]
        self.rng.shuffle(combos)
        used: dict[str, int] = {}
        for (name, slot, first, third, questions, bait), s in combos:
            if len(self.facts) >= n or used.get(name, 0) >= 2 or not self.pools[slot]:
                continue
            used[name] = used.get(name, 0) + 1
            p = self.members[s]
            x = self.pools[slot].pop()
            q = _fmt(_question(self.rng, questions), p.sub())
            roll = self.rng.random()
            if roll < 0.45:
                texts = [_Text(_fmt(self.rng.choice(first), {"x": x}), s)]
            else:
                teller = self._other(s)
                said = _fmt(self.rng.choice(third), {"x": x})
                if roll < 0.75:
                    texts = [_Text(_fmt(said, p.sub()), teller)]
                else:  # by pronoun: the turn before names the person
                    said = _fmt(_pronoun(said), p.sub())
                    lead = self._lead(p.nick)
                    texts = [_Text(said, teller, lead, self._other(teller))]
            self.facts.append(_Fact("single", name, texts, q, x, self._sessions(1)))
            self.bait += [(b, self.rng.randrange(MEMBERS)) for b in bait]
            if self.rng.random() < 0.4 and self.pools[slot]:  # the same, about a friend
                y = self.pools[slot].pop()
                other = (s + 1) % MEMBERS
                self.bait.append((_fmt(self.rng.choice(first), {"x": y}), other))

    def whens(self, n: int) -> None:
        combos = [(t, s) for t in W.WHEN for s in range(MEMBERS)]
        self.rng.shuffle(combos)
        names: dict[str, int] = {}
        start = len(self.facts)
        for (name, first, third, questions, bait), s in combos:
            if len(self.facts) - start >= n or names.get(name, 0) >= 2:
                continue
            names[name] = names.get(name, 0) + 1
            p = self.members[s]
            q = _fmt(_question(self.rng, questions), p.sub())
            trip = self.rng.random() < 0.25 and self.n_sessions >= 6
            if trip:
                days = self.rng.choice((10, 14, 21))
                phrase = {10: "ten days before the trip", 14: "two weeks before the trip",
                          21: "three weeks before we flew out"}[days]
            else:
                phrase, days = self.rng.choice(_PHRASES), 0
            if self.rng.random() < 0.5:
                text, speaker = self.rng.choice(first), s
            else:
                text, speaker = _fmt(self.rng.choice(third), p.sub()), self._other(s)
            text = text.replace("{When}", phrase[0].upper() + phrase[1:]).replace(
                "{when}", phrase)
            text = _fmt(text, p.sub())
            texts = [_Text(text, speaker)]
            trip_day = None
            if trip:  # the trip dated in an earlier session; the event told after it
                a = self.rng.randrange(self.n_sessions - 3)
                trip_day = self.dates[a] + timedelta(days=self.rng.randint(8, 20))
                after = [k for k in range(a + 1, self.n_sessions) if self.dates[k] > trip_day]
                if not after:
                    continue
                sessions = [a, self.rng.choice(after)]
                city = self.pools["city"].pop() if self.pools["city"] else "the coast"
                who = "we fly" if speaker == s else f"{p.nick} flies"
                texts.insert(0, _Text(f"Flights booked: {who} to {city} on {trip_day:%A} the "
                                      f"{_ordinal(trip_day.day)} of {trip_day:%B}!", speaker))
            else:
                sessions = self._sessions(1)
            self.facts.append(_Fact("when", name, texts, q, "", sessions, (phrase, days),
                                    trip_day))
            self.bait += [(b, self.rng.randrange(MEMBERS)) for b in bait]

    def chains(self, n: int) -> None:
        combos = [(t, s) for t in W.CHAIN for s in range(MEMBERS)]
        self.rng.shuffle(combos)
        k = 0
        for (name, slots, questions, links, bait), s in combos:
            if k >= n or len(links) > self.n_sessions or not self.others:
                break
            p = self.members[s]
            tp = self.others.pop()
            rel, relq, _ = self.rng.choice([r for r in W.RELATIONS if r[2] in (None, tp.he)])
            values = {v: self.pools[slot].pop() for v, slot in slots.items()
                      if self.pools[slot]}
            if len(values) < len(slots):
                break
            sub = {**p.sub(), **tp.sub("2"), "T": tp.full, "TN": tp.nick, "rel": rel,
                   "relq": relq, **values}
            # Later links name the third person by full name as often as by nickname
            # (friends mix them), so a nickname does not tie a chain together.
            texts = [_Text(_fmt(t if i == 0 or self.rng.random() < 0.5
                                else t.replace("{TN}", "{T}"), sub),
                           s if i == 0 else self._other(s))
                     for i, t in enumerate(links)]
            if self.rng.random() < 0.25:  # the question may use the turn's word for them
                sub["relq"] = rel
            q = _fmt(self.rng.choice(questions), sub)
            self.facts.append(_Fact("multi-hop", name, texts, q, values["x"],
                                    self._sessions(len(texts))))
            self.bait += [(b, self.rng.randrange(MEMBERS)) for b in bait]
            k += 1

    def inferences(self, n: int) -> None:
        for name, evidence, questions, cues, bait in self.rng.sample(W.INFER, min(n, len(W.INFER))):
            s = self.rng.randrange(MEMBERS)
            q = _fmt(self.rng.choice(questions), self.members[s].sub())
            v = self.rng.randrange(len(evidence))
            self.facts.append(_Fact("inference", name, [_Text(evidence[v], s)],
                                    q, cues[v], self._sessions(1)))
            self.bait += [(b, self.rng.randrange(MEMBERS)) for b in bait]


def _talk(rng: random.Random, world: _World, speaker: int, sentences: int) -> str:
    parts = []
    for line in rng.sample(W.TALK, sentences):
        friend = world.members[rng.choice([k for k in range(MEMBERS) if k != speaker])]
        parts.append(_fmt(line, {"M": friend.nick, "P": friend.he}
                          | {k: rng.choice(v) for k, v in W.TALK_SLOTS.items()}))
    text = " ".join(parts)
    if rng.random() < 0.3:
        text = f"{rng.choice(W.REACTS)} {text[0].lower()}{text[1:]}"
    return text


def _filler(rng: random.Random, world: _World, speaker: int) -> str:
    roll = rng.random()
    if roll < 0.12 and world.bait:
        return rng.choice(world.bait)[0]
    if roll < 0.27:
        return rng.choice(W.ACKS)
    if roll < 0.72:
        return _talk(rng, world, speaker, 1)
    if roll < 0.88:
        return _talk(rng, world, speaker, rng.randint(2, 3))
    return _talk(rng, world, speaker, rng.randint(5, 9))  # a long, rambling turn


def _wrap(rng: random.Random, world: _World, text: str, speaker: int) -> str:
    """An evidence sentence, sometimes inside a longer turn of chatter."""
    if rng.random() < 0.35:
        before = _talk(rng, world, speaker, rng.randint(1, 2)) if rng.random() < 0.5 else ""
        after = _talk(rng, world, speaker, rng.randint(1, 3))
        return " ".join(x for x in (before, text, after) if x)
    return text


def _conversation(c: int, size: Size, seed: int) -> Conversation:
    rng = random.Random(f"dialogue-{seed}-{c}")
    day = datetime(2024, 2, 5, tzinfo=UTC) + timedelta(days=37 * c)
    dates: list[date] = []
    for _ in range(size.sessions):
        day += timedelta(days=rng.randint(4, 12))
        dates.append(day.date())
    world = _World(rng, size, dates)
    q = size.questions
    world.singles(q["single"])
    world.whens(q["when"])
    world.chains(q["multi-hop"])
    world.inferences(q["inference"])
    names = tuple(m.full for m in world.members)
    conv = Conversation(id=f"d{c:02d}", language="en", speakers=(names[0], names[1]),
                        asker=W.ASKER)
    # what goes in each session: (text, its fact, index of the text in its fact)
    plan: dict[int, list[tuple[_Text, _Fact, int]]] = {s: [] for s in range(size.sessions)}
    for f in world.facts:
        for i, (s, t) in enumerate(zip(f.sessions, f.texts, strict=True)):
            plan[s].append((t, f, i))
    placed: dict[int, list[str]] = {}
    for s in range(size.sessions):
        start = datetime.combine(dates[s], datetime.min.time(), UTC).replace(
            hour=rng.randint(17, 21), minute=rng.choice((0, 10, 25, 40)))
        conv.session_dates.append(dates[s].isoformat())
        n = max(rng.randint(*size.turns), 3 * len(plan[s]) + 4)
        at = dict(zip(sorted(rng.sample(range(2, n), len(plan[s]))), plan[s], strict=True))
        last, clock, index = -1, 0, 0
        for i in range(n):
            lines: list[tuple[str, int, _Fact | None]] = []
            entry = at.get(i)
            if entry is not None:
                text, f, _ = entry
                if text.lead:
                    lines.append((text.lead, text.lead_speaker, f))
                lines.append((_wrap(rng, world, text.text, text.speaker), text.speaker, f))
            elif i == 0:
                lines.append((rng.choice(W.GREETINGS), rng.randrange(MEMBERS), None))
            else:
                spk = rng.choice([k for k in range(MEMBERS) if k != last])
                lines.append((_filler(rng, world, spk), spk, None))
            for said, spk, fact in lines:
                mid = f"{conv.id}s{s:02d}t{index:03d}"
                index += 1
                clock += rng.randint(30, 240)
                m = world.members[spk]
                conv.turns.append(Message(mid, m.full, f"U-{conv.id}-{spk}", said,
                                          (start + timedelta(seconds=clock)).timestamp(), s))
                last = spk
                if fact is not None:
                    placed.setdefault(id(fact), []).append(mid)
    for k, f in enumerate(world.facts):
        answer = f.answer
        if f.kind == "when":
            assert f.when is not None
            phrase, days = f.when
            if f.trip is not None:
                answer = (f.trip - timedelta(days=days)).isoformat()
            else:
                answer = resolve(phrase, dates[f.sessions[-1]]).isoformat()
        conv.questions.append(Question(f"{conv.id}q{k:03d}", f.kind, f.question, answer,
                                       tuple(placed[id(f)]), f.name))
    check(conv)
    return conv


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def check(conv: Conversation) -> None:
    """Raise ``AssertionError`` when an invariant of the module docstring does not hold."""
    turns = conv.by_id()
    texts = [t.text for t in conv.turns]
    for q in conv.questions:
        assert q.evidence and all(e in turns for e in q.evidence), q
        assert q.answer.lower() not in q.question.lower(), q
        if q.kind in ("when", "inference"):
            continue
        pat = re.compile(r"(?<![A-Za-z0-9])" + re.escape(q.answer) + r"(?![A-Za-z0-9])",
                         re.IGNORECASE)
        assert any(pat.search(turns[e].text) for e in q.evidence), q
        others = [t.id for t in conv.turns if t.id not in q.evidence and pat.search(t.text)]
        assert not others, (q, [turns[o].text for o in others])
    for e in {e for q in conv.questions for e in q.evidence}:
        assert sum(turns[e].text in other for other in texts) == 1, turns[e].text


def generate(size: str | Size = "full", seed: int = 13) -> list[Conversation]:
    """The conversations of ``size`` ("quick", "full" or a ``Size``), the same for a seed."""
    spec = SIZES[size] if isinstance(size, str) else size
    return [_conversation(c, spec, seed) for c in range(spec.conversations)]
