"""In-process fake summary models for the memory tests (STYLE.md 9: fakes fail loudly).

``ScriptedModel`` answers from a list of steps and raises on a call the script did not
expect; ``assert_done()`` (called by the ``scripted`` fixture in ``conftest.py``) fails the
test when a step was never requested. ``ExtractiveModel`` is a well-behaved model for tests
that need many compactions: it parses the request and answers with the offline extractive
summary, optionally rewritten (``rewrite``) to misbehave on purpose. Both count calls and
the most calls in flight at once, so tests can check single-flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memory.completion import ChatMessage
from memory.extractive import extractive_summary
from memory.summary_prompt import SummaryRequest, parse_summary_request
from memory.tokens import Tokenizer

__all__ = ["Answer", "Block", "ExtractiveModel", "Respond", "ScriptedModel", "Step",
           "UnexpectedCall", "extractive"]


@dataclass(frozen=True)
class Answer:
    """What ``complete`` returns: only ``.text`` is read by the summarizer."""

    text: str


Respond = Callable[[SummaryRequest], str]


@dataclass(frozen=True)
class Block:
    """A step that waits for ``release`` and then answers ``then`` (text, an exception, or
    a function of the request). ``entered`` is set when the call starts, so a test can act
    while the model is busy.
    """

    release: asyncio.Event
    then: str | BaseException | Respond
    entered: asyncio.Event = field(default_factory=asyncio.Event)


Step = str | BaseException | Block | Respond


class UnexpectedCall(BaseException):
    """A call no script step was written for.

    A ``BaseException`` on purpose: the manager retries failed compactions (it catches
    ``Exception``), which would turn a scripting mistake into an endless retry loop; this
    ends the compaction task instead, and the ``scripted`` fixture fails the test.
    """


def extractive(tokenizer: Tokenizer) -> Respond:
    """A well-behaved answer: the offline extractive summary of the request."""

    def respond(request: SummaryRequest) -> str:
        return extractive_summary(
            request.previous,
            request.facts,
            request.blocks,
            max_tokens=request.max_tokens,
            tokenizer=tokenizer,
        )

    return respond


class _Meter:
    def __init__(self) -> None:
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: list[SummaryRequest] = []
        self.purposes: list[str] = []

    def enter(self, messages: Sequence[ChatMessage], purpose: str) -> SummaryRequest:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        request = parse_summary_request(messages)
        self.requests.append(request)
        self.purposes.append(purpose)
        return request

    def leave(self) -> None:
        self.in_flight -= 1

    @property
    def calls(self) -> int:
        return len(self.requests)


class ScriptedModel(_Meter):
    """Answers each call with the next step; an unexpected call raises ``AssertionError``."""

    def __init__(self, *steps: Step) -> None:
        super().__init__()
        self.steps = list(steps)
        self.unexpected: list[str] = []

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> Answer:
        request = self.enter(messages, purpose)
        try:
            if not self.steps:
                self.unexpected.append(purpose)
                raise UnexpectedCall(f"unexpected model call #{self.calls} ({purpose})")
            step = self.steps.pop(0)
            if isinstance(step, Block):
                step.entered.set()
                await step.release.wait()
                step = step.then
            if isinstance(step, BaseException):
                raise step
            if callable(step):
                step = step(request)
            return Answer(step)
        finally:
            self.leave()

    def assert_done(self) -> None:
        """Fail when a call was not scripted or a scripted step was never requested."""
        assert not self.unexpected, f"unexpected model calls: {self.unexpected}"
        assert not self.steps, f"scripted answers never requested: {self.steps}"


class ExtractiveModel(_Meter):
    """A well-behaved summary model (the offline extractive summary of the request).

    ``rewrite`` post-processes every answer (e.g. to drop identifiers on purpose);
    ``gate``, when given, must be set before any call may answer; ``allow_digest`` false
    makes a ``/summary`` call an error, so a test notices an unexpected one.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        rewrite: Callable[[str, SummaryRequest], str] | None = None,
        gate: asyncio.Event | None = None,
        allow_digest: bool = False,
    ) -> None:
        super().__init__()
        self.tokenizer = tokenizer
        self.rewrite = rewrite
        self.gate = gate
        self.allow_digest = allow_digest

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str
    ) -> Answer:
        request = self.enter(messages, purpose)
        try:
            if purpose != "summary" and not (purpose == "digest" and self.allow_digest):
                raise UnexpectedCall(f"unexpected {purpose!r} call")
            if self.gate is not None:
                await self.gate.wait()
            await asyncio.sleep(0)  # let other tasks run while "the model thinks"
            text = extractive(self.tokenizer)(request)
            if self.rewrite is not None:
                text = self.rewrite(text, request)
            return Answer(text)
        finally:
            self.leave()
