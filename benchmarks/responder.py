"""The deterministic model behind the benchmark's fake OpenAI server.

Replies echo the triggering message in one short paragraph, so every memory produces the
same conversation. Summaries behave like a decent but imperfect model (the same for
gistbot's and LangChain's requests):

* they keep the sentences that carry identifiers, decisions and questions, with the speaker,
  under the section headings gistbot asks for, merged after the previous summary;
* they stay under the bound (gistbot states it; LangChain's prompt has none, so the same
  ``summary_tokens`` applies) by forgetting the oldest items first, chit-chat before facts;
* asked for gistbot's archive blocks (``EPISODE``, ``NEW FACTS``), they write one line
  on who talked about what and up to 12 fact lines (identifier and decision sentences);
* they **drop on purpose** every identifier whose stable hash falls in one bucket of
  ``drop_every`` (about 1 in 5), as real models paraphrase "order ORD-77812" into
  "the order"; asked again for missing identifiers (gistbot's retry), they restore only
  about half. Without a facts carry-forward such identifiers are lost.

Every call is logged (``Call``) with its request body, so token counts are taken after the
run, off the event loop.
"""

from __future__ import annotations

import contextlib
import re
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.common import Config
from memory.identifiers import context_for, extract_identifiers, split_sentences
from memory.summary_prompt import parse_summary_request
from memory.tokens import TokenCounter, Tokenizer
from tests.fakes.openai_server import FakeOpenAI, is_summary_request

__all__ = ["LANGCHAIN_MARK", "NOTHING", "Call", "FakeSummarizer", "Responder", "fake_server",
           "request_kind"]

LANGCHAIN_MARK = "Progressively summarize the lines of conversation"
SECTIONS = ("Topics", "Facts and identifiers", "Decisions", "Open requests")
NOTHING = "## Topics\n- (nothing of note yet)"
"""The summary of a fold with nothing worth keeping (``FakeSummarizer.summarize``)."""
_EVICT_ORDER = (0, 3, 2, 1)  # chit-chat topics leave first, identifiers last
_DECISION = re.compile(r"(?i)\b(decided|agreed|let's|we'll|i'll|will|approved|confirmed)\b")
_SPEAKER = re.compile(r"^\[([^\]]*)\]: ?(.*)$", re.DOTALL)
JSON = dict[str, Any]


def _bucket(text: str, n: int) -> int:
    return zlib.crc32(text.encode()) % n


def request_kind(body: JSON) -> str:
    """``summary`` for gistbot's and LangChain's summarizer prompts, else ``reply``."""
    if is_summary_request(body):
        return "summary"
    contents = [str(m.get("content", "")) for m in body.get("messages", [])]
    return "summary" if any(LANGCHAIN_MARK in c for c in contents) else "reply"


@dataclass
class Call:
    """One chat request the fake answered: which memory (``model``), what for, the body."""

    model: str
    kind: str
    body: JSON
    answer: str


class FakeSummarizer:
    """Bounded, sectioned, slightly forgetful summaries; see the module docstring."""

    def __init__(self, tokenizer: Tokenizer, *, drop_every: int = 5) -> None:
        self.tok = tokenizer
        self.drop_every = drop_every

    def dropped(self, ident: str) -> bool:
        """Whether this model paraphrases ``ident`` away on a first answer."""
        return _bucket(ident, self.drop_every) == 0

    def archive(self, blocks: Sequence[tuple[str, str]]) -> str:
        """The ``EPISODE`` and ``NEW FACTS`` blocks gistbot asks for after the summary: who
        said what first, then identifier and decision sentences as facts (about 1 in 5
        identifiers paraphrased away here too, independently of the summary)."""
        speakers = list(dict.fromkeys(who for who, _ in blocks))
        first = next((s for _, t in blocks for s in split_sentences(t) if len(s.split()) > 3),
                     "small talk")
        episode = f"{', '.join(speakers[:4])} talked; {' '.join(first.split()[:20])}"
        facts: list[str] = []
        for speaker, text in blocks:
            for sentence in split_sentences(text):
                ids = extract_identifiers(sentence)
                if not ids and not _DECISION.search(sentence):
                    continue
                short = " ".join(sentence.split()[:24])
                for ident in ids:
                    if _bucket(ident + "#fact", self.drop_every) == 0:
                        short = short.replace(ident, "").replace("  ", " ")
                if f"{speaker}: {short}" not in facts:
                    facts.append(f"{speaker}: {short}")
        lines = [f"- {f}" for f in facts[:12]]
        return "\n".join(["<<<EPISODE>>>", episode, "<<<END EPISODE>>>", "<<<NEW FACTS>>>",
                          *lines, "<<<END NEW FACTS>>>"])

    def summarize(self, previous: str, blocks: Sequence[tuple[str, str]], bound: int,
                  missing: Sequence[str] = (), *, say_who: bool = False) -> str:
        """The new summary: previous items, then new ones, within ``bound`` tokens.

        With nothing worth keeping (a first fold of small talk, possible at a small
        budget) the answer is ``NOTHING``; with ``say_who`` it names who talked about what
        instead, as a model would: gistbot rejects an answer that shares no word with the
        conversation and retries with back-off, which would stall a replay."""
        sections = self._parse(previous)
        seen = {item for items in sections for item in items}
        for speaker, text in blocks:
            for sentence in split_sentences(text):
                placed = self._item(speaker, sentence)
                if placed is not None and placed[1] not in seen:
                    seen.add(placed[1])
                    sections[placed[0]].append(placed[1])
        source = "\n".join([previous, *(t for _, t in blocks)])
        for ident in missing:  # a retry: restores about half of what it was asked for
            if _bucket(ident + "#retry", 2) == 0:
                context = " ".join(context_for(ident, source).split()[:12])
                sections[1].append(f"{ident} — {context}" if context else ident)
        text = self._fit(sections, int(bound * 0.92))
        if text == NOTHING and say_who and blocks:
            who, said = blocks[0]
            text = f"## Topics\n- {who} talked about: {' '.join(said.split()[:10])}"
        return text

    def _item(self, speaker: str, sentence: str) -> tuple[int, str] | None:
        ids = extract_identifiers(sentence)
        words = sentence.split()
        if len(words) > 18:  # keep a window around the first identifier
            at = next((i for i, w in enumerate(words) if ids and ids[0] in w), 0)
            words = words[max(0, at - 8): max(0, at - 8) + 18]
        short = " ".join(words)
        if ids:
            for ident in ids:
                if self.dropped(ident):
                    short = short.replace(ident, "").replace("  ", " ")
            return 1, f"{speaker}: {short}"
        if _DECISION.search(sentence):
            return 2, f"{speaker}: {short}"
        if sentence.rstrip().endswith(("?", "？")):
            return 3, f"{speaker} asked: {short}"
        if _bucket(sentence, 4) == 0 and len(words) > 4:
            return 0, f"{speaker} talked about: {' '.join(words[:10])}"
        return None

    @staticmethod
    def _parse(previous: str) -> list[list[str]]:
        sections: list[list[str]] = [[] for _ in SECTIONS]
        current = 0
        for line in previous.splitlines():
            if line.startswith("## "):
                name = line[3:].strip()
                current = SECTIONS.index(name) if name in SECTIONS else 0
            elif line.startswith("- "):
                sections[current].append(line[2:])
        return sections

    @staticmethod
    def _render(sections: list[list[str]]) -> str:
        out: list[str] = []
        for name, items in zip(SECTIONS, sections, strict=True):
            if items:
                out += [f"## {name}", *(f"- {i}" for i in items), ""]
        return "\n".join(out).strip()

    def _fit(self, sections: list[list[str]], target: int) -> str:
        text = self._render(sections)
        while self.tok.count(text) > target:
            victim = next((s for s in _EVICT_ORDER if sections[s]), None)
            if victim is None:
                break
            # forget several at a time when far over, so long summaries stay cheap to fit
            over = self.tok.count(text) - target
            del sections[victim][: max(1, over // 40)]
            text = self._render(sections)
        return text or NOTHING


def _langchain_parts(prompt: str) -> tuple[str, list[tuple[str, str]]]:
    """(previous summary, speaker blocks) of LangChain's SUMMARY_PROMPT."""
    tail = prompt.rsplit("Current summary:\n", 1)[-1]
    previous, _, rest = tail.partition("\n\nNew lines of conversation:\n")
    lines = rest.rsplit("\n\nNew summary:", 1)[0]
    blocks: list[tuple[str, str]] = []
    for line in lines.split("\n"):
        for prefix in ("Human: ", "AI: ", "System: "):
            if line.startswith(prefix):
                text = line[len(prefix):]
                match = _SPEAKER.match(text)
                who = match[1] if match else prefix[:-2]
                blocks.append((who, match[2] if match else text))
                break
        else:
            if blocks:
                blocks[-1] = (blocks[-1][0], blocks[-1][1] + "\n" + line)
    return previous.strip(), blocks


def _reply(body: JSON) -> str:
    users = [str(m.get("content", "")) for m in body.get("messages", []) if m["role"] == "user"]
    last = users[-1] if users else ""
    match = _SPEAKER.match(last)
    who, text = (match[1], match[2]) if match else ("there", last)
    echo = " ".join(text.split()[:24])
    return (f"Thanks {who}, noted. To recap what you said: {echo}. I'll keep it in mind, "
            "and mention me again if you want a summary of where things stand.")


@dataclass
class Responder:
    """``responder`` and ``latency`` hooks for ``FakeOpenAI``; logs every call."""

    summarizer: FakeSummarizer
    summary_tokens: int
    reply_latency: float
    summary_latency: float
    calls: list[Call] = field(default_factory=list)
    summary_latency_by_model: dict[str, float] = field(default_factory=dict)

    def __call__(self, body: JSON) -> str:
        kind = request_kind(body)
        answer = _reply(body) if kind == "reply" else self._summary(body)
        self.calls.append(Call(str(body.get("model", "")), kind, body, answer))
        return answer

    def latency(self, body: JSON) -> float:
        """Fixed latency per kind of request (summaries: per model when overridden)."""
        if request_kind(body) == "reply":
            return self.reply_latency
        return self.summary_latency_by_model.get(str(body.get("model")), self.summary_latency)

    def _summary(self, body: JSON) -> str:
        messages = body.get("messages", [])
        if is_summary_request(body):
            req = parse_summary_request(messages)
            text = self.summarizer.summarize(req.previous, req.blocks, req.max_tokens,
                                             req.missing, say_who=True)
            system = str(messages[0].get("content", "")) if messages else ""
            if "<<<EPISODE>>>" in system and not req.digest:  # gistbot's archive blocks
                text += "\n\n" + self.summarizer.archive(req.blocks)
            return text
        prompt = next(str(m["content"]) for m in messages if LANGCHAIN_MARK in str(m["content"]))
        previous, blocks = _langchain_parts(prompt)
        return self.summarizer.summarize(previous, blocks, self.summary_tokens)

    def take(self, model: str) -> list[Call]:
        """Remove and return the calls made with ``model`` (one memory's calls)."""
        mine = [c for c in self.calls if c.model == model]
        self.calls = [c for c in self.calls if c.model != model]
        return mine


@contextlib.asynccontextmanager
async def fake_server(cfg: Config) -> AsyncIterator[tuple[FakeOpenAI, Responder]]:
    """The one loopback fake: deterministic answers, fixed latencies, every call logged."""
    responder = Responder(FakeSummarizer(TokenCounter("gpt-4o")), cfg.summary_tokens,
                          cfg.reply_latency, cfg.summary_latency)
    fake = FakeOpenAI(responder=responder, latency=responder.latency, strict=False)
    async with fake:
        yield fake, responder
