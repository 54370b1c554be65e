"""The language model seam: the ``LLM`` protocol, the OpenAI-compatible client and the
offline stand-in.

``OpenAILLM`` talks to any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio,
llama.cpp, gateways) through the official ``openai`` SDK. Retries are the SDK's:
``max_retries`` extra attempts on connection errors, timeouts, 408/409/429/5xx, waiting
``retry-after-ms``/``Retry-After`` when the server sends one (≤ 120 s) and backing off
exponentially (0.5 s, 1 s, … ≤ 8 s) otherwise. Whatever still fails becomes a
``bot.errors.LLMError`` (``llm_error_from``), so callers never see an SDK exception.
Calls pass through the LLM gateway: first the payer open in the caller's context
(``bot.channels.usage_tab``: the daily token quotas of ``bot.channels.quota`` may refuse the call
before it starts, and charge it the reported usage after it), then a ``bot.llm.gate.LLMGate``: at
most ``concurrency`` at once, replies and digests before background summaries, at most
``summary_concurrency`` summaries, and a waiting reply preempts a summary (which raises
``memory.errors.Preempted``).

``OfflineLLM`` needs no network and is deterministic: extractive summaries, and replies that
say no model is configured and show what the bot remembers.

Both remove reasoning blocks (``bot.llm.thinking``) and satisfy ``memory.completion.SummaryModel``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypedDict, TypeVar, runtime_checkable
from urllib.parse import urlsplit

import openai
from openai import NOT_GIVEN, AsyncOpenAI, AsyncStream, NotGiven, Omit, omit
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

from bot.channels.usage_tab import UsageTab, metered, metered_hold, note_usage
from bot.errors import LLMBadResponse, LLMError, LLMTimeout, ModelNotServed, llm_error_from
from bot.llm.cost import chat_cost, text_cost
from bot.llm.gate import LLMGate
from bot.llm.thinking import ThinkFilter, strip_think
from bot.settings.params import merged, split_params
from bot.wording import plural
from memory.completion import ChatMessage
from memory.errors import Preempted
from memory.tokens import Tokenizer

__all__ = [
    "LLM",
    "PURPOSES",
    "Completion",
    "OpenAILLM",
    "PurposeTotals",
    "Usage",
    "UsageMeter",
    "UsageRecord",
]

T = TypeVar("T")
_Limit = int | Omit
PURPOSES = ("reply", "summary", "digest")
_SUMMARY_PURPOSES = ("summary", "digest")
# Streamed even by ``complete``: preempted calls, whose cancelled request must stop the
# server's generation (llama.cpp and Ollama notice a closed connection only mid-stream).
_STREAMED = ("summary",)
_OPENAI_URL = "https://api.openai.com/v1"
# Local servers ignore the key but the SDK insists on one, and would otherwise read
# OPENAI_API_KEY from the environment behind the settings' back.
_NO_KEY = "no-key-required"
_UNSUPPORTED = ("unsupported", "not supported", "unrecognized", "extra inputs", "unknown")


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one call consumed, as the provider reported them (0 when it did not)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Completion:
    """A finished answer: never-empty text (reasoning removed), usage, the model that wrote it."""

    text: str
    usage: Usage
    model: str


@runtime_checkable
class LLM(Protocol):
    """What the bot needs from a language model. ``purpose`` is ``"reply"``, ``"summary"``
    (compaction) or ``"digest"`` (``/summary``); implementations may route by it. ``model``
    overrides the configured model for this one request (a channel's setting), and
    ``params`` adds request fields over the configured ones (a channel's ``params``,
    ``bot.settings.params``); callers pass them only when a channel chose them."""

    name: str
    is_offline: bool

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> Completion: ...

    def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[str]:
        """Text deltas, reasoning removed. Raises ``LLMError`` like ``complete``."""
        ...


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One call: what for, which model, tokens, wall time; ``ok`` is False for failures."""

    purpose: str
    model: str
    usage: Usage
    latency: float
    ok: bool = True
    error: str = ""  # the failure's kind (an ``LLMError`` class name) when not ``ok``


@dataclass(slots=True)
class PurposeTotals:
    """Running totals for one purpose."""

    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency: float = 0.0  # seconds, summed over calls


@dataclass
class UsageMeter:
    """Counts tokens and time per call, so ``doctor``, stats and benchmarks can say what
    replies and summaries cost. Keeps the last ``keep`` records; totals cover all calls."""

    keep: int = 1000
    records: deque[UsageRecord] = field(init=False)
    _totals: dict[str, PurposeTotals] = field(init=False, default_factory=dict)
    # Called with every record (the admin server's metrics); must not raise.
    listeners: list[Callable[[UsageRecord], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.records = deque(maxlen=self.keep)

    def record(self, purpose: str, model: str, usage: Usage, latency: float) -> None:
        """Note a successful call."""
        self._add(UsageRecord(purpose, model, usage, latency))

    def record_error(self, purpose: str, model: str, latency: float, error: str = "") -> None:
        """Note a failed call (after the SDK's retries); ``error`` names its kind."""
        self._add(UsageRecord(purpose, model, Usage(), latency, ok=False, error=error))

    def totals(self) -> dict[str, PurposeTotals]:
        """A copy of the totals, keyed by purpose."""
        return {purpose: replace(t) for purpose, t in self._totals.items()}

    def _add(self, rec: UsageRecord) -> None:
        self.records.append(rec)
        t = self._totals.setdefault(rec.purpose, PurposeTotals())
        t.calls, t.errors = t.calls + 1, t.errors + (not rec.ok)
        t.prompt_tokens += rec.usage.prompt_tokens
        t.completion_tokens += rec.usage.completion_tokens
        t.latency += rec.latency
        for listener in self.listeners:
            listener(rec)


def _check_purpose(purpose: str) -> None:
    if purpose not in PURPOSES:
        raise ValueError(f"purpose must be one of {PURPOSES}, not {purpose!r}")


def _usage(raw: object) -> Usage:
    p, c = getattr(raw, "prompt_tokens", 0), getattr(raw, "completion_tokens", 0)
    return Usage(p if isinstance(p, int) else 0, c if isinstance(c, int) else 0)


def _reported(raw: object) -> bool:
    """Whether ``raw`` (a response's ``usage``) says what the call used."""
    return all(isinstance(getattr(raw, name, None), int)
               for name in ("prompt_tokens", "completion_tokens"))


def _raw_text(response: object) -> str:
    """The answer as the model wrote it, reasoning included (what it was paid for)."""
    choices = getattr(response, "choices", None) or [None]
    content = getattr(getattr(choices[0], "message", None), "content", None)
    return content if isinstance(content, str) else ""


def _text_of(response: object) -> str:
    """The answer in a chat completion, reasoning removed; LLMBadResponse if there is none."""
    if not isinstance(response, ChatCompletion):  # the SDK returns str for non-JSON bodies
        raise LLMBadResponse(f"expected a chat completion, got {type(response).__name__}")
    choices = getattr(response, "choices", None)  # unset when the JSON lacks the field
    if not choices:
        raise LLMBadResponse("the model endpoint returned no choices")
    content = getattr(getattr(choices[0], "message", None), "content", None)
    text = strip_think(content) if isinstance(content, str) else ""
    if not text:
        raise LLMBadResponse("the model returned no text (or only reasoning)")
    return text


class OpenAILLM:
    """``LLM`` over any OpenAI-compatible Chat Completions endpoint. ``summary_model``
    (default: ``model``) serves ``summary`` and ``digest``. ``concurrency`` calls at once
    (``LLM_CONCURRENCY``), of which at most ``summary_concurrency`` summaries
    (``SUMMARY_CONCURRENCY``); see ``bot.llm.gate``. ``tokenizer`` prices a call for its
    quota reservation (``bot.llm.cost``). Reads no environment variables."""

    is_offline = False

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        model: str,
        summary_model: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        meter: UsageMeter | None = None,
        concurrency: int = 4,
        summary_concurrency: int = 8,
        summary_timeout: float | None = None,
        tokenizer: Tokenizer | None = None,
        params: Mapping[str, Any] | None = None,
        summary_params: Mapping[str, Any] | None = None,
    ) -> None:
        self.model, self.summary_model = model, summary_model or model
        self.tokenizer = tokenizer  # prices a call's prompt for its quota reservation
        # Request fields added to replies (MODEL_PARAMS) and to summaries and /summary
        # (SUMMARY_MODEL_PARAMS); a call's own ``params`` go over them (bot.settings.params).
        self.params, self.summary_params = dict(params or {}), dict(summary_params or {})
        # Per request, from when the call holds its slot: a summary that waited behind
        # replies still gets its whole time (``SUMMARY_TIMEOUT``).
        self.summary_timeout = summary_timeout
        self.gate = LLMGate(concurrency, summary_slots=summary_concurrency)
        self.base_url = base_url or _OPENAI_URL
        self.name = f"openai:{model}"
        self._meter = meter
        self._client = AsyncOpenAI(
            api_key=api_key or _NO_KEY,
            base_url=self.base_url,
            timeout=timeout,
            max_retries=max_retries,
        )
        # OpenAI's reasoning models reject max_tokens; many local servers know only it.
        # Start with the likely one; switch once if the server rejects it by name.
        on_openai = urlsplit(self.base_url).hostname == "api.openai.com"
        self._token_param = "max_completion_tokens" if on_openai else "max_tokens"

    def model_for(self, purpose: str, model: str | None = None) -> str:
        """The model that serves ``purpose`` (``model`` when a channel chose one)."""
        _check_purpose(purpose)
        if model:
            return model
        return self.summary_model if purpose in _SUMMARY_PURPOSES else self.model

    def params_for(self, purpose: str, params: Mapping[str, Any] | None = None
                   ) -> dict[str, Any]:
        """The request fields a ``purpose`` call carries: the configured ones for it, with
        the call's own ``params`` (a channel's choice) over them."""
        return merged(self.params if purpose == "reply" else self.summary_params, params)

    async def complete(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One chat completion, reasoning removed. Raises ``LLMError`` subclasses, and
        ``Preempted`` for a summary that gave its slot to a reply."""
        model = self.model_for(purpose, model)
        fields = self.params_for(purpose, params)

        def cost() -> int:
            return chat_cost(messages, max_tokens, self.tokenizer)

        if purpose not in _STREAMED:
            return await metered(purpose, lambda: self.gate.run(
                purpose, lambda: self._complete(messages, max_tokens, purpose, model, fields)
            ), cost=cost)
        got = _Progress()
        try:
            return await metered(purpose, lambda: self.gate.run(
                purpose,
                lambda: self._collect(messages, max_tokens, purpose, model, got, fields),
            ), cost=cost)
        except Preempted as e:  # say how far it got
            elapsed = None if got.started is None else time.monotonic() - got.started
            raise Preempted(str(e), elapsed=elapsed, received=got.pieces) from None

    async def _collect(
        self, messages: Sequence[ChatMessage], max_tokens: int, purpose: str, model: str,
        got: _Progress, fields: Mapping[str, Any],
    ) -> Completion:
        """A completion read from a stream, so that cancelling it (preemption) closes the
        connection and the server stops generating; ``SUMMARY_TIMEOUT`` bounds it whole."""
        got.started = time.monotonic()
        limit = self._timeout_for(purpose)
        pieces: list[str] = []
        stream = self._stream(messages, max_tokens, purpose, model, fields, got=got,
                              limit=limit)
        try:
            async with contextlib.aclosing(stream), asyncio.timeout(
                limit if isinstance(limit, float | int) else None
            ):
                async for piece in stream:
                    pieces.append(piece)
        except TimeoutError:
            self._record(purpose, model, got.started, None, LLMTimeout.__name__)
            raise LLMTimeout("the model endpoint did not answer in time") from None
        return Completion("".join(pieces).strip(), got.usage, got.model or model)

    async def _complete(
        self, messages: Sequence[ChatMessage], max_tokens: int, purpose: str, model: str,
        fields: Mapping[str, Any],
    ) -> Completion:
        started = time.monotonic()  # once the slot is held: queueing is not latency
        try:
            try:
                response = await self._call(
                    lambda mt, mct: self._client.chat.completions.create(
                        model=model,
                        **_body(messages, fields),
                        max_tokens=mt,
                        max_completion_tokens=mct,
                        timeout=self._timeout_for(purpose),
                    ),
                    max_tokens,
                )
            except (openai.OpenAIError, ValueError) as exc:  # ValueError: body not JSON
                raise llm_error_from(exc) from exc
            text = _text_of(response)
        except LLMError as e:
            self._record(purpose, model, started, None, type(e).__name__)
            raise
        answered = Completion(text, _usage(response.usage), response.model or model)
        self._record(purpose, answered.model, started, answered.usage)
        if not _reported(response.usage):  # a server that reports none: estimated
            self._unreported(messages, text_cost([_raw_text(response) or text],
                                                 self.tokenizer), None)
        return answered

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, purpose: str,
        model: str | None = None, params: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[str, None]:
        """Text deltas as they arrive, reasoning removed even when a tag spans chunks. The
        stream holds its gate slot until it ends (or is closed)."""
        model = self.model_for(purpose, model)
        fields = self.params_for(purpose, params)

        def cost() -> int:
            return chat_cost(messages, max_tokens, self.tokenizer)

        async with metered_hold(purpose, cost=cost) as tab, self.gate.hold(purpose):
            pieces = self._stream(messages, max_tokens, purpose, model, fields, tab)
            async with contextlib.aclosing(pieces):
                async for piece in pieces:
                    yield piece

    async def _stream(
        self, messages: Sequence[ChatMessage], max_tokens: int, purpose: str, model: str,
        fields: Mapping[str, Any], tab: UsageTab | None = None, got: _Progress | None = None,
        limit: float | NotGiven = NOT_GIVEN,
    ) -> AsyncGenerator[str, None]:
        started = time.monotonic()
        think, usage, sent, reported = ThinkFilter(), Usage(), False, False
        got = got or _Progress()
        try:
            try:
                chunks: AsyncStream[ChatCompletionChunk] = await self._call(
                    lambda mt, mct: self._client.chat.completions.create(
                        model=model,
                        **_body(messages, fields),
                        stream=True,
                        stream_options={"include_usage": True},
                        max_tokens=mt,
                        max_completion_tokens=mct,
                        timeout=limit,
                    ),
                    max_tokens,
                )
                async with chunks:
                    async for chunk in chunks:
                        if chunk.usage is not None:
                            usage, reported = _usage(chunk.usage), True
                        delta = chunk.choices[0].delta.content if chunk.choices else None
                        got.pieces += bool(delta)
                        if delta:
                            got.text.append(delta)
                        got.model = chunk.model or got.model
                        if piece := think.feed(delta or ""):
                            sent = True
                            yield piece
            except (openai.OpenAIError, ValueError) as exc:
                raise llm_error_from(exc) from exc
            if tail := think.flush():
                sent = True
                yield tail
            if not sent:
                raise LLMBadResponse("the stream carried no text (or only reasoning)")
        except LLMError as e:
            self._record(purpose, model, started, None, type(e).__name__)
            raise
        finally:
            if not reported and got.pieces:  # cut short, or a server that reports none
                self._unreported(messages, max(got.pieces, text_cost(
                    ["".join(got.text)], self.tokenizer)), tab)
        got.usage = usage
        self._record(purpose, got.model or model, started, usage, tab=tab)

    def _unreported(self, messages: Sequence[ChatMessage], pieces: int,
                    tab: UsageTab | None) -> None:
        """A call that answered without reporting its usage (a stream cut short before its
        last chunk, a server that reports none) still spent its prompt and the ``pieces``
        (tokens, or stream chunks) it sent: the quotas count those, estimated
        (``bot.llm.cost``); the meter keeps only what providers report."""
        (tab.add if tab is not None else note_usage)(
            chat_cost(messages, 0, self.tokenizer), pieces)

    async def probe(self, models: Sequence[tuple[str, str]] | None = None) -> str:
        """One line about the endpoint for ``gistbot doctor``; raises ``LLMError``.
        ``models``: the (setting, model) pairs it must serve (default: the reply and
        summary models); the first is the one a tiny completion tries."""
        url = urlsplit(self.base_url)  # shown without user info or query
        where = f"{url.scheme}://{url.hostname}{f':{url.port}' if url.port else ''}{url.path}"
        pairs = list(models) if models else self._model_settings()
        wanted = sorted({m for _, m in pairs})
        try:
            ids = {m.id async for m in self._client.models.list()}
        except (openai.NotFoundError, openai.APIResponseValidationError, ValueError):
            ids = set()  # some servers have no /models
        except openai.OpenAIError as exc:
            raise llm_error_from(exc) from exc
        if not ids:
            took = await self._tiny_completion(pairs[0][1])
            return f"{where}: answered with model {pairs[0][1]} in {took:.2f} s"
        missing = [(var, m) for var, m in pairs if m not in ids]
        if missing:
            served = ", ".join(sorted(ids)[:10]) + (", …" if len(ids) > 10 else "")
            names = " and ".join(f"{var}={m}" for var, m in missing)
            raise ModelNotServed(
                f"{where} does not serve {names}; it serves {served}. "
                "Set the model name to one it serves."
            )
        took = await self._tiny_completion(pairs[0][1])
        return (f"{where}: reachable, {plural(len(ids), 'model')}, using {', '.join(wanted)}; "
                f"a tiny completion took {took:.2f} s")

    async def _tiny_completion(self, model: str) -> float:
        """Seconds one tiny completion of ``model`` takes (a slow or cold model shows
        here, before the first reply waits for it); raises ``LLMError``."""
        started = time.monotonic()
        await self.complete([{"role": "user", "content": "Say OK."}], max_tokens=8,
                            purpose="reply", model=model)
        return time.monotonic() - started

    def _model_settings(self) -> list[tuple[str, str]]:
        """(setting, model) for the reply model and, if different, the summary model."""
        pairs = [("MODEL_NAME", self.model)]
        if self.summary_model != self.model:
            pairs.append(("SUMMARY_MODEL_NAME", self.summary_model))
        return pairs

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()

    async def _call(self, create: Callable[[_Limit, _Limit], Awaitable[T]], limit: int) -> T:
        """``create(max_tokens, max_completion_tokens)`` with ``limit`` in the parameter the
        server accepts: we switch once if it rejects the one we sent by name."""
        try:
            return await create(*self._limits(limit))
        except openai.BadRequestError as exc:
            text = f"{exc.message} {exc.body}".lower()
            if self._token_param not in text or not any(w in text for w in _UNSUPPORTED):
                raise
            self._token_param = (
                "max_tokens"
                if self._token_param == "max_completion_tokens"
                else "max_completion_tokens"
            )
            return await create(*self._limits(limit))

    def _timeout_for(self, purpose: str) -> float | NotGiven:
        if purpose in _SUMMARY_PURPOSES and self.summary_timeout is not None:
            return self.summary_timeout
        return NOT_GIVEN

    def _limits(self, limit: int) -> tuple[_Limit, _Limit]:
        return (limit, omit) if self._token_param == "max_tokens" else (omit, limit)

    def _record(self, purpose: str, model: str, started: float, usage: Usage | None,
                error: str = "", *, tab: UsageTab | None = None) -> None:
        if usage is not None:  # a stream's tab, or the one open in this context
            (tab.add if tab is not None else note_usage)(usage.prompt_tokens,
                                                         usage.completion_tokens)
        if self._meter is None:
            return
        if usage is None:
            self._meter.record_error(purpose, model, time.monotonic() - started, error)
        else:
            self._meter.record(purpose, model, usage, time.monotonic() - started)


@dataclass(slots=True)
class _Progress:
    """How far a streamed call got: when it started, answer chunks received (and their
    text, to estimate what they cost when no usage is reported), and at the end its usage
    and the model that answered."""

    started: float | None = None
    pieces: int = 0
    text: list[str] = field(default_factory=list)  # the chunks' text, reasoning included
    usage: Usage = field(default_factory=Usage)
    model: str = ""


class _MessagesArgs(TypedDict):
    messages: list[ChatCompletionMessageParam]
    extra_body: dict[str, object]


def _body(messages: Sequence[ChatMessage], fields: Mapping[str, Any]) -> dict[str, Any]:
    """``create()``'s messages and request ``fields``: the fields ``create()`` names as
    arguments (``temperature``, ``top_p`` …) as those, any other merged into the body with
    the messages through ``extra_body`` (``bot.settings.params``)."""
    named, extra = split_params(fields)
    args = _messages(messages)
    return {**named, "messages": args["messages"],
            "extra_body": {**extra, **args["extra_body"]}}


def _messages(messages: Sequence[ChatMessage]) -> _MessagesArgs:
    """``create()``'s messages, sent as they are through ``extra_body`` (which the SDK
    merges over the body it built). ``create()`` walks ``messages`` against the union of
    every message type, key by key, to rename aliased keys, which ours (role, content)
    never have, on the event loop, where no other channel's event is handled meanwhile
    (docs/decisions/0001; ``tests/test_llm.py`` checks the body on the wire)."""
    return {"messages": [], "extra_body": {"messages": [dict(m) for m in messages]}}
