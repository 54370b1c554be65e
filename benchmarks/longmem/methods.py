"""The baselines' prompts, and the one token measure every method is held to.

Every method produces the chat messages it would send for a question. Their size is
measured the same way for all (``memory_tokens``): tokens on the wire by OpenAI's chat
recipe (3 per message + role + content, 3 to prime the answer; o200k via gistbot's
``TokenCounter("gpt-4o")``) minus gistbot's fixed overhead for the default system prompt
(``bot.conversation.prompts.fixed_overhead``), i.e. exactly what gistbot's memory budget pays for.
So "budget B" means the same prompt size for every method: ``CONTEXT_TOKENS − REPLY_TOKENS``
when gistbot's memory budget is B. The question itself counts (gistbot's view holds it as
its newest turn).

Baselines render their selected turns in time order inside the system message, one line
per turn (``Name: text``), under a date line per session (``[14 Mar 2023]``), so they pay
for the dates a temporal question needs; the question follows as a user message
``[Asker]: question``, gistbot's format for a user turn.

* ``last-N window`` — the newest turns that fit.
* ``BM25 over raw turns`` — the last 4 turns, then older turns by ``rank_bm25.BM25Okapi``
  score for the question (lowercase word tokens; character bigrams for CJK runs), best
  first, each added when it still fits (ties: newer first), until nothing more fits.
* ``full history`` — every turn, whatever the budget (a ceiling; its size is reported).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

from benchmarks.longmem.generate import Conversation, Question
from bot.conversation.prompts import fixed_overhead
from bot.settings import DEFAULT_SYSTEM_PROMPT
from memory.completion import ChatMessage
from memory.tokens import TokenCounter

__all__ = ["BASELINES", "Prompt", "RawTurnIndex", "bm25_tokens", "fixed", "memory_tokens",
           "prompt_text", "tokenizer"]

BASELINES = ("last-N window", "BM25 over raw turns", "full history")
RECENT = 4  # turns the BM25 baseline always keeps
_CJK = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u9fff\uac00-\ud7af]+")
_WORD = re.compile(r"\w+")


@cache
def tokenizer() -> TokenCounter:
    """The one counter for every method."""
    return TokenCounter("gpt-4o")


@cache
def fixed() -> int:
    """gistbot's fixed prompt overhead with the default system prompt."""
    return fixed_overhead(DEFAULT_SYSTEM_PROMPT, tokenizer())


def memory_tokens(messages: Sequence[ChatMessage]) -> int:
    """Wire tokens of a prompt minus the fixed overhead: what a memory budget pays for."""
    tok = tokenizer()
    wire = 3 + sum(3 + tok.count(str(m["role"])) + tok.count(str(m["content"]))
                   for m in messages)
    return wire - fixed()


def prompt_text(messages: Sequence[ChatMessage]) -> str:
    """All the prompt's text, for "is it in the prompt"."""
    return "\n".join(str(m["content"]) for m in messages)


def bm25_tokens(text: str) -> list[str]:
    """Lowercase word tokens; a CJK run becomes its character bigrams (or the one char)."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        pos = 0
        for m in _CJK.finditer(word):
            if m.start() > pos:
                out.append(word[pos:m.start()])
            run = m.group()
            out += [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]
            pos = m.end()
        if pos < len(word):
            out.append(word[pos:])
    return out


def _date(ts: float) -> str:
    d = datetime.fromtimestamp(ts, UTC)
    return f"{d.day} {d:%b %Y}"


@dataclass(frozen=True)
class Prompt:
    """What one method would send for one question."""

    messages: list[ChatMessage]
    tokens: int  # memory_tokens(messages)


class RawTurnIndex:
    """One conversation's raw turns, their rendered costs and a BM25 index over them."""

    def __init__(self, conv: Conversation) -> None:
        from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

        self.conv = conv
        self.turns = conv.turns
        tok = tokenizer()
        self.line = [f"{t.speaker}: {t.text}" for t in self.turns]
        self.cost = [tok.count(line) + 1 for line in self.line]
        self.header = {t.session: f"[{_date(t.sent_at)}]" for t in self.turns}
        self.header_cost = {s: tok.count(h) + 1 for s, h in self.header.items()}
        self.index = BM25Okapi([bm25_tokens(t.text) or ["∅"] for t in self.turns])

    def render(self, chosen: Sequence[int], q: Question) -> list[ChatMessage]:
        """System prompt + the chosen turns (time order, dated sessions) + the question."""
        lines: list[str] = []
        session = None
        for i in sorted(chosen):
            if self.turns[i].session != session:
                session = self.turns[i].session
                lines.append(self.header[session])
            lines.append(self.line[i])
        system = DEFAULT_SYSTEM_PROMPT
        if lines:
            system += "\n\nEarlier conversation:\n" + "\n".join(lines)
        asker = self.conv.asker[0]
        return [{"role": "system", "content": system},
                {"role": "user", "content": f"[{asker}]: {q.question}"}]

    def _fit(self, order: Sequence[int], q: Question, budget: int | None, *,
             contiguous: bool = False) -> Prompt:
        """Add turns in ``order`` while they fit ``budget`` (None: all); with ``contiguous``
        stop at the first that does not fit, else skip it and try the next. The per-line
        token sum is an estimate: the real count is checked at the end."""
        base = memory_tokens(self.render([], q)) + tokenizer().count("Earlier conversation:") + 2
        chosen: list[int] = []
        sessions: set[int] = set()
        used = base
        for i in order:
            s = self.turns[i].session
            add = self.cost[i] + (0 if s in sessions else self.header_cost[s])
            if budget is not None and used + add > budget:
                if contiguous:
                    break
                continue
            chosen.append(i)
            sessions.add(s)
            used += add
        while True:
            messages = self.render(chosen, q)
            tokens = memory_tokens(messages)
            if budget is None or tokens <= budget or not chosen:
                return Prompt(messages, tokens)
            chosen.pop()

    def last_n(self, q: Question, budget: int) -> Prompt:
        """The newest turns that fit (stops at the first that does not)."""
        return self._fit(range(len(self.turns) - 1, -1, -1), q, budget, contiguous=True)

    def bm25(self, q: Question, budget: int) -> Prompt:
        """The last ``RECENT`` turns, then older turns by BM25 score for the question."""
        n = len(self.turns)
        scores = self.index.get_scores(bm25_tokens(q.question))
        older = sorted(range(n - RECENT), key=lambda i: (-scores[i], -i))
        return self._fit([*range(n - 1, n - RECENT - 1, -1), *older], q, budget)

    def full(self, q: Question) -> Prompt:
        """Every turn."""
        return self._fit(range(len(self.turns)), q, None)

    def prompt(self, method: str, q: Question, budget: int) -> Prompt:
        """The prompt of a baseline by its name in ``BASELINES``."""
        if method == "last-N window":
            return self.last_n(q, budget)
        if method == "BM25 over raw turns":
            return self.bm25(q, budget)
        return self.full(q)

