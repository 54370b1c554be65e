"""In-process fake models for the memory and runtime tests; they fail loudly.

One class, ``ScriptedModel``, answers each call with the next scripted step and raises
``UnexpectedCall`` on a call the script did not expect; ``assert_done()`` (called by the
``scripted`` fixture in ``conftest.py``) fails the test when a step was never requested.
Its options cover the other models the tests need:

* ``then``: the answer for every call once the steps are used up (a model that may be
  called any number of times);
* ``purposes``: the purposes a call may have; any other is an unexpected call;
* ``on_call``: a hook run as each call starts (a child process logs it);
* ``yields`` and ``delay``: let other tasks run, or wait, before answering.

The presets are subclasses that only choose options: ``ExtractiveModel`` (a well-behaved
summary model, optionally misbehaving on purpose), ``LoggingModel`` (the multi-process
tests' model, which logs each call to a shared file) and ``ArchiveModel`` (summaries,
episodes, facts and replies for the long-term memory tests). Every model records each call
(``received``), counts them and the most calls in flight at once, so tests can check
single-flight.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from memory.completion import ChatMessage
from memory.extractive import extractive_summary
from memory.summary_prompt import SummaryRequest, parse_summary_request
from memory.tokens import Tokenizer

__all__ = [
    "Answer",
    "ArchiveModel",
    "Block",
    "Call",
    "ExtractiveModel",
    "Hang",
    "LoggingModel",
    "Respond",
    "ScriptedModel",
    "Step",
    "UnexpectedCall",
    "extractive",
]


@dataclass(frozen=True)
class Answer:
    """What ``complete`` returns: only ``.text`` is read by the summarizer and the service."""

    text: str


@dataclass
class Call:
    """One call a model received."""

    messages: list[ChatMessage]
    max_tokens: int
    purpose: str

    @cached_property
    def request(self) -> SummaryRequest:
        """The summary request this call carries (parsed when first asked for)."""
        return parse_summary_request(self.messages)


Respond = Callable[[Call], str]


@dataclass(frozen=True)
class Hang:
    """A step that never answers in time: it fails the test unless its call is cancelled."""

    seconds: float = 5.0


@dataclass(frozen=True)
class Block:
    """A step that waits for ``release`` and then answers ``then`` (text, an exception, or
    a function of the call). ``entered`` is set when the call starts, so a test can act
    while the model is busy.
    """

    release: asyncio.Event
    then: str | BaseException | Hang | Respond
    entered: asyncio.Event = field(default_factory=asyncio.Event)


Step = str | BaseException | Hang | Block | Respond


class UnexpectedCall(BaseException):
    """A call no script step was written for.

    A ``BaseException`` on purpose: the manager retries failed compactions (it catches
    ``Exception``), which would turn a scripting mistake into an endless retry loop; this
    ends the compaction task instead, and the ``scripted`` fixture fails the test.
    """


def extractive(tokenizer: Tokenizer) -> Respond:
    """A well-behaved answer: the offline extractive summary of the request."""

    def respond(call: Call) -> str:
        request = call.request
        return extractive_summary(
            request.previous,
            request.facts,
            request.blocks,
            max_tokens=request.max_tokens,
            tokenizer=tokenizer,
        )

    return respond


class ScriptedModel:
    """Answers each call with the next step; an unexpected call raises ``UnexpectedCall``.

    A call is unexpected when its purpose is not in ``purposes`` (when given), or when the
    steps are used up and there is no ``then``. ``entered`` is set once a call has started.
    """

    def __init__(
        self,
        *steps: Step,
        then: Step | None = None,
        purposes: Collection[str] | None = None,
        on_call: Callable[[Call], object] | None = None,
        yields: int = 0,
        delay: float = 0.0,
    ) -> None:
        self.steps = list(steps)
        self.then = then
        self.purposes_allowed = purposes
        self.on_call = on_call
        self.yields = yields
        self.delay = delay
        self.received: list[Call] = []
        self.unexpected: list[str] = []
        self.entered = asyncio.Event()
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def calls(self) -> int:
        """How many calls were made (unexpected ones included)."""
        return len(self.received)

    @property
    def requests(self) -> list[SummaryRequest]:
        """The summary request of every call, in order."""
        return [call.request for call in self.received]

    @property
    def purposes(self) -> list[str]:
        """The purpose of every call, in order."""
        return [call.purpose for call in self.received]

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> Answer:
        """Answer with the next step (after waiting, when the step or the options say so)."""
        call = Call(list(messages), max_tokens, purpose)
        self.received.append(call)
        if self.on_call is not None:
            self.on_call(call)
        self.entered.set()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            step = self._next_step(purpose)
            if isinstance(step, Block):
                step.entered.set()
                await step.release.wait()
                step = step.then
            for _ in range(self.yields):
                await asyncio.sleep(0)  # let other tasks run while "the model thinks"
            if self.delay:
                await asyncio.sleep(self.delay)
            if isinstance(step, Hang):
                await asyncio.sleep(step.seconds)
                raise AssertionError("a hanging step was not cancelled")
            if isinstance(step, BaseException):
                raise step
            if callable(step):
                step = step(call)
            return Answer(step)
        finally:
            self.in_flight -= 1

    def _next_step(self, purpose: str) -> Step:
        allowed = self.purposes_allowed is None or purpose in self.purposes_allowed
        if allowed and self.steps:
            return self.steps.pop(0)
        if allowed and self.then is not None:
            return self.then
        self.unexpected.append(purpose)
        raise UnexpectedCall(f"unexpected model call #{self.calls} ({purpose})")

    def assert_done(self) -> None:
        """Fail when a call was not scripted or a scripted step was never requested."""
        assert not self.unexpected, f"unexpected model calls: {self.unexpected}"
        assert not self.steps, f"scripted answers never requested: {self.steps}"


class ExtractiveModel(ScriptedModel):
    """A well-behaved summary model (the offline extractive summary of the request), for
    tests that need many compactions.

    ``rewrite`` post-processes every answer (e.g. to drop identifiers on purpose);
    ``gate``, when given, must be set before any call may answer; ``allow_digest`` false
    makes a ``/summary`` call unexpected, so a test notices one.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        rewrite: Callable[[str, SummaryRequest], str] | None = None,
        gate: asyncio.Event | None = None,
        allow_digest: bool = False,
    ) -> None:
        summary = extractive(tokenizer)

        def respond(call: Call) -> str:
            text = summary(call)
            return text if rewrite is None else rewrite(text, call.request)

        super().__init__(
            then=respond if gate is None else Block(gate, respond),
            purposes=("summary", "digest") if allow_digest else ("summary",),
            yields=1,
        )


class LoggingModel(ScriptedModel):
    """The multi-process tests' model: appends ``<pid> call`` to the shared ``log`` as each
    call starts, so a parent can count calls across processes, then answers after half a
    second with the whole request's data (so every identifier is kept), its markers left
    out (an answer that echoes them is a non-answer).

    ``hang`` makes it never answer (the parent kills the process); ``gate``, when given,
    must be set before it answers.
    """

    def __init__(self, log: str, hang: bool = False, *, gate: asyncio.Event | None = None) -> None:
        self.log = log

        def respond(call: Call) -> str:
            data = [line for line in call.messages[-1]["content"].splitlines()
                    if not line.startswith(("<<<", "Token limit"))]  # no echoed markers
            return "## Topics\n- turns folded by a child process\n" + "\n".join(data)

        if hang:
            gate = asyncio.Event()  # never set
        super().__init__(
            then=respond if gate is None else Block(gate, respond),
            on_call=self._append_to_log,
            delay=0.5,
        )

    def _append_to_log(self, call: Call) -> None:
        # One short append, before anything else can happen: blocking is what we want here.
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} call\n")


class ArchiveModel(ScriptedModel):
    """Both the summarizer and the reply model of the long-term memory tests.

    Summaries keep only the last message (so the rolling summary *loses* older details);
    a summary also writes an episode and extracts ``FACT:`` lines as long-term facts,
    marking a known fact with the same subject word as replaced (``blocks=False`` leaves
    out episode and facts). Replies answer ``ok``; ``prompts`` holds their system messages.
    """

    name = "fake"
    is_offline = False

    def __init__(self, *, blocks: bool = True) -> None:
        self.blocks = blocks
        super().__init__(then=self._respond)

    @property
    def prompts(self) -> list[str]:
        """The system message of every reply, in order."""
        return [c.messages[0]["content"] for c in self.received if c.purpose == "reply"]

    @property
    def summary_calls(self) -> int:
        """How many summary and digest calls were made."""
        return sum(c.purpose != "reply" for c in self.received)

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[str]:
        """The whole answer as one delta."""
        yield (await self.complete(messages, max_tokens=max_tokens, purpose=purpose)).text

    def _respond(self, call: Call) -> str:
        if call.purpose == "reply":
            return "ok"
        req = call.request
        last_who, last_text = req.blocks[-1]
        text = f"## Topics\n- {last_who}: {last_text.splitlines()[-1][:200]}"
        if call.purpose == "digest" or not self.blocks:
            return text
        known = {}
        for item in req.known:
            m = re.match(r"\[(\d+)\] (.*)", item)
            assert m, item
            known[int(m[1])] = m[2]
        facts = []
        for who, said in req.blocks:
            for line in said.splitlines():
                if line.startswith("FACT: "):
                    fact = line[6:]
                    subject = fact.split()[1]
                    old = [i for i, t in known.items() if t.split()[1:2] == [subject]]
                    prefix = f"[replaces {old[0]}] " if old else ""
                    facts.append(f"- {prefix}{fact} ({who})")
        episode = f"{last_who} talked about {last_text.split()[-1]}"
        return "\n".join(
            [
                text,
                "<<<EPISODE>>>",
                episode,
                "<<<END EPISODE>>>",
                "<<<NEW FACTS>>>",
                *facts,
                "<<<END NEW FACTS>>>",
            ]
        )
