"""A loopback OpenAI-compatible server, so tests drive the real ``openai`` SDK over HTTP.

Serves ``POST /v1/chat/completions`` (JSON, or SSE with ``stream: true``) and ``GET
/v1/models`` on 127.0.0.1, port 0, and records every request. Answers come from a script the
test pushes, then from ``responder(request_json) -> str``; ``latency(request_json) -> float``
delays answers (say 0.1 s for replies, 2 s for summaries). It fails loudly: a request with
nothing to answer it gets a non-retryable 500, and leaving ``async with`` raises
``AssertionError`` for those and for unconsumed script steps.

``max_concurrency=1`` makes a one-slot endpoint like llama.cpp's: chat requests are served
one at a time, the rest queue in arrival order (a script step is taken when a request is
served). Whatever the limit, the server counts what it serves: ``served`` (in the order
requests got their slot), ``peak`` and ``peak_summaries`` (most chat requests, and most
summary requests, in flight at once) and ``disconnected`` (requests whose client went away
before the answer was complete, e.g. a cancelled call).

``finish_abandoned=True`` behaves like llama.cpp's server: a *non-streamed* request whose
client went away is generated to the end anyway, holding its slot (``abandoned`` lists
those that ran on after their client left); a *streamed* one stops at the next chunk, when
writing to the closed connection fails. The default stops both at once.

``POST /v1/embeddings`` answers deterministic vectors (:func:`embedding`): a hashed bag of
the input's words, each word first mapped through ``concepts`` (``{"rio": "brazil"}``
makes a text about Rio close to one about Brazil), so paraphrase tests are controlled.
``embedding_delay`` (seconds) and ``embedding_error`` (an :class:`Error`, or ``Hang``)
make the endpoint slow or failing; ``embedding_requests`` lists what it was asked.

``refuse_image(data) -> bool`` makes it answer a request carrying an image whose decoded
bytes it refuses with OpenAI's 400 for an image it cannot read (``refused`` lists those
requests), before any script step is taken. ``reject(body) -> str | None`` makes it answer
any chat request it returns a message for with a 400 about a request field, as OpenAI
answers a parameter it does not take (``rejected`` lists those requests).
``report_usage = False`` leaves ``usage`` out of every answer, streamed or not, as some
OpenAI-compatible servers do.

A script step may also be a fault of the fakes' one switch (``tests.fakes.faults.Fault``):
500 before or after "generating" (a model call's only effect is its cost), a reset
connection, a hang until the client gives up, or a 429 with ``Retry-After: 0``.

``python -m tests.fakes.openai_server --port 0`` prints its base URL as the first line of
stdout and answers with :func:`default_responder` until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import re
import signal
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.fakes.faults import Fault, reset
from tests.harness.deadlines import scaled

__all__ = [
    "EmptyChoices", "Error", "FakeOpenAI", "Hang", "Malformed", "Request", "Text",
    "content_text", "context_length_error", "default_responder", "embedding", "image_bytes",
    "image_parts",
    "is_summary_request", "rate_limited",
]  # fmt: skip

JSON = dict[str, Any]


@dataclass(frozen=True)
class Text:
    """A normal answer; ``chunks`` fixes how a streamed one is split (default: by word)."""

    text: str
    chunks: Sequence[str] | None = None
    chunk_delay: float = 0.0  # seconds before each streamed chunk (a slow model)


@dataclass(frozen=True)
class Error:
    """An HTTP error: ``body`` is sent as JSON if it is a dict, else as text."""

    status: int
    body: object = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Say nothing for ``seconds`` (the client should time out first), then answer."""

    seconds: float


@dataclass(frozen=True)
class Malformed:
    """A 200 whose JSON (or SSE data line) is cut off."""

    body: str = '{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{'


@dataclass(frozen=True)
class EmptyChoices:
    """A well-formed completion with ``choices: []``."""


Scripted = Text | Error | Hang | Malformed | EmptyChoices | Fault


def context_length_error(limit: int = 8192, used: int = 9000) -> Error:
    """OpenAI's exact 400 for a prompt over the context window."""
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {used} tokens. Please reduce the length of the messages."
    )
    body = {"message": message, "type": "invalid_request_error", "param": "messages"}
    return Error(400, {"error": body | {"code": "context_length_exceeded"}})


def rate_limited(retry_after: str = "1") -> Error:
    """OpenAI's 429, with a ``Retry-After`` header."""
    body = {"message": "Rate limit reached for requests", "type": "requests", "param": None}
    body["code"] = "rate_limit_exceeded"
    return Error(429, {"error": body}, {"Retry-After": retry_after})


@dataclass(frozen=True)
class Request:
    """One request as the server saw it; ``at`` is ``time.monotonic()`` on arrival."""

    method: str
    path: str
    json: JSON | None
    headers: Mapping[str, str]
    at: float


def is_summary_request(body: JSON) -> bool:
    """Whether a chat request asks for a summary: its system prompt is the summarizer's
    ("You keep the memory of a group chat"), not a reply prompt that merely contains one."""
    system = " ".join(content_text(m.get("content", "")) for m in _messages(body)
                      if m["role"] == "system")
    return "keep the memory of a group chat" in system or bool(
        re.match(r"\s*summar", system, re.IGNORECASE)
    )


def default_responder(body: JSON) -> str:
    """Deterministic answers for end-to-end runs: a summary request gets its transcript's
    data lines as bullets within its ``Token limit``; anything else, the last user message."""
    messages = _messages(body)
    users = [content_text(m.get("content", "")) for m in messages if m["role"] == "user"]
    if not is_summary_request(body):
        return f"You said: {users[-1][:500]}" if users else "Hello."
    text = "\n".join(users)
    limit = re.search(r"Token limit: (\d+)", text)
    # 0.8 characters per token of the limit: safe even for CJK and unknown tokenizers
    budget = int(0.8 * int(limit[1] if limit else body.get("max_tokens") or 256))
    data = text.split("<<<", 1)[1] if "<<<" in text else text  # skip the instructions
    kept: list[str] = []
    for line in data.splitlines():
        line = re.sub(r"^\[((?:[^\]\\]|\\.)*)\]:", r"\1:", line.strip(" -\t"))
        if line and "<<<" not in line and ">>>" not in line and f"- {line}" not in kept:
            if sum(map(len, kept)) + len(line) + 2 > budget:
                break
            kept.append(f"- {line}")
    return "\n".join(kept) or "- (nothing to summarize yet)"


def content_text(content: Any) -> str:
    """A message's text: the string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content
                         if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def image_parts(body: JSON) -> list[JSON]:
    """The ``image_url`` parts of a chat request, in order."""
    return [p for m in _messages(body) if isinstance(m.get("content"), list)
            for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url"]


def image_bytes(part: JSON) -> bytes:
    """The decoded bytes of an ``image_url`` part's data URL (b"" for another URL)."""
    url = str((part.get("image_url") or {}).get("url", ""))
    return base64.b64decode(url.split(",", 1)[1]) if url.startswith("data:") else b""


_DATA_URL = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+=*\Z")


def part_error(body: JSON) -> str | None:
    """What OpenAI would reject in the request's content parts (None: nothing): parts other
    than text and images, an image that is no data URL of PNG, JPEG, GIF or WebP or no
    https URL, a detail other than auto, low and high, or an image outside a user message."""
    for m in _messages(body):
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for p in content:
            kind = p.get("type") if isinstance(p, dict) else None
            if kind == "text" and isinstance(p.get("text"), str):
                continue
            if kind != "image_url" or m["role"] != "user":
                return f"invalid content part in a {m['role']} message: {kind!r}"
            image = p.get("image_url") or {}
            url = str(image.get("url", ""))
            if not (_DATA_URL.match(url) or url.startswith("https://")):
                return f"invalid image url: {url[:40]!r}"
            if image.get("detail", "auto") not in ("auto", "low", "high"):
                return f"invalid detail: {image.get('detail')!r}"
    return None


def _messages(body: JSON) -> list[JSON]:
    raw = body.get("messages")
    return [m for m in raw if isinstance(m, dict) and "role" in m] if isinstance(raw, list) else []


def _usage(body: JSON, text: str) -> JSON:
    """``{"usage": ...}`` with made-up but deterministic counts (~4 characters a token)."""
    prompt = sum(len(content_text(m.get("content", ""))) // 4 + 1 for m in _messages(body))
    done = len(text) // 4 + 1 if text else 0
    usage = {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}
    return {"usage": usage}


EMBEDDING_DIMENSIONS = 1024


def embedding(text: str, concepts: Mapping[str, str] | None = None,
              dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A hashed bag of ``text``'s lower-cased words (after ``concepts``), unnormalized:
    texts sharing words (or concepts) point the same way; others are near-orthogonal."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        word = (concepts or {}).get(word, word)
        vector[zlib.crc32(word.encode()) % dimensions] += 1.0
    return vector


class FakeOpenAI:
    """The server; use as ``async with FakeOpenAI() as fake:`` and point a client at
    ``fake.base_url``."""

    def __init__(
        self,
        *,
        responder: Callable[[JSON], str] | None = None,
        latency: Callable[[JSON], float] | None = None,
        models: Sequence[str] = ("gpt-test", "gpt-test-mini"),
        strict: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        max_concurrency: int | None = None,
        finish_abandoned: bool = False,
        concepts: Mapping[str, str] | None = None,
    ) -> None:
        self.responder, self.latency, self.models, self.strict = responder, latency, models, strict
        self.requests: list[Request] = []
        self.unexpected: list[Request] = []
        self.served: list[Request] = []
        self.disconnected: list[Request] = []
        self.abandoned: list[Request] = []
        self.finish_abandoned = finish_abandoned
        self._generating: set[asyncio.Future[web.StreamResponse]] = set()
        self.active: list[Request] = []
        self.peak = self.peak_summaries = 0
        self.max_concurrency = max_concurrency
        self._slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        self._script: deque[Scripted] = deque()
        self._host, self._port = host, port
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._seq = 0
        self._arrived = asyncio.Condition()
        self.base_url = ""
        self.concepts = dict(concepts or {})
        self.embedding_delay = 0.0
        self.embedding_error: Error | Hang | None = None
        self.refuse_image: Callable[[bytes], bool] | None = None
        self.refused: list[Request] = []
        self.reject: Callable[[JSON], str | None] | None = None
        self.rejected: list[Request] = []
        self.report_usage = True  # False: answers carry no ``usage``, as some servers do

    @property
    def chat_requests(self) -> list[Request]:
        """Only the chat completion requests, in arrival order."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[Request]:
        """Only the embedding requests, in arrival order."""
        return [r for r in self.requests if r.path.endswith("/embeddings")]

    def embedded_texts(self) -> list[str]:
        """Every input text the embedding endpoint was asked for, in order."""
        out: list[str] = []
        for r in self.embedding_requests:
            given = (r.json or {}).get("input", [])
            out += [given] if isinstance(given, str) else list(given)
        return out

    def push(self, *items: Scripted | str) -> None:
        """Queue answers for the next chat requests; a ``str`` means ``Text(str)``."""
        self._script.extend(Text(i) if isinstance(i, str) and not isinstance(i, Fault) else i
                            for i in items)

    async def start(self) -> None:
        """Bind to a free port and serve."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        # handler_cancellation: a hung handler ends when the client gives up.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://{self._host}:{port}/v1"

    async def close(self) -> None:
        """Stop serving; hung handlers return at once."""
        self._closing.set()
        for work in list(self._generating):
            work.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        if exc is None and self.strict:
            assert not self.unexpected, f"unscripted requests: {self.unexpected}"
            assert not self._script, f"script steps never consumed: {list(self._script)}"

    async def _record(self, request: web.Request) -> Request:
        try:
            body = await request.json() if request.can_read_body else None
        except ValueError:
            body = None
        headers = request.headers.copy()  # case-insensitive lookups, like HTTP
        seen = Request(request.method, request.path, body, headers, time.monotonic())
        self.requests.append(seen)
        async with self._arrived:
            self._arrived.notify_all()
        return seen

    async def wait_for(self, done: Callable[[FakeOpenAI], bool], within: float = 10.0) -> None:
        """Wait until ``done(self)`` holds, checked as each request arrives."""
        async with asyncio.timeout(scaled(within)), self._arrived:
            await self._arrived.wait_for(lambda: done(self))

    async def _models(self, request: web.Request) -> web.Response:
        await self._record(request)
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _embeddings(self, request: web.Request) -> web.Response:
        seen = await self._record(request)
        body = seen.json or {}
        if self.embedding_delay:
            await asyncio.sleep(self.embedding_delay)
        step = self.embedding_error
        if isinstance(step, Hang):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), step.seconds)
        elif isinstance(step, Error):
            text = json.dumps(step.body) if isinstance(step.body, dict) else str(step.body or "")
            return web.Response(text=text, status=step.status, headers=step.headers,
                                content_type="application/json")
        given = body.get("input", [])
        texts = [given] if isinstance(given, str) else list(given)
        data = [{"object": "embedding", "index": i, "embedding": embedding(t, self.concepts)}
                for i, t in enumerate(texts)]
        tokens = sum(len(t.split()) + 1 for t in texts)
        usage = {"usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        return web.json_response({"object": "list", "data": data, "model": body.get("model")}
                                 | (usage if self.report_usage else {}))

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        seen = await self._record(request)
        if not self.finish_abandoned or (seen.json or {}).get("stream"):
            return await self._serve(request, seen)
        # Like llama.cpp: a non-streamed generation never notices its client leaving.
        work = asyncio.ensure_future(self._serve(request, seen))
        self._generating.add(work)
        work.add_done_callback(self._generating.discard)
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            if not work.done():
                self.abandoned.append(seen)
                self.disconnected.append(seen)
            raise

    async def _serve(self, request: web.Request, seen: Request) -> web.StreamResponse:
        try:
            async with self._slots or contextlib.nullcontext():
                self.served.append(seen)
                self.active.append(seen)
                try:
                    self.peak = max(self.peak, len(self.active))
                    summaries = sum(is_summary_request(r.json or {}) for r in self.active)
                    self.peak_summaries = max(self.peak_summaries, summaries)
                    return await self._answer(request, seen)
                finally:
                    self.active.remove(seen)
        except (asyncio.CancelledError, ConnectionResetError):
            self.disconnected.append(seen)  # the client gave up (handler_cancellation)
            raise

    @staticmethod
    def _fault(request: web.Request, fault: Fault) -> Scripted:
        """The step a fault of the switch stands for here (a reset happens at once)."""
        if fault is Fault.RATE_LIMITED:
            return rate_limited("0")
        if fault is Fault.AFTER_HANG:
            return Hang(3600)
        if fault is Fault.AFTER_RESET:
            reset(request)
        return Error(500, {"error": {"message": "upstream exploded", "type": "server_error"}})

    async def _answer(self, request: web.Request, seen: Request) -> web.StreamResponse:
        body = seen.json or {}
        if (wrong := part_error(body)) is not None:  # as OpenAI answers a malformed part
            err = {"error": {"message": wrong, "type": "invalid_request_error"}}
            return web.json_response(err, status=400)
        if self.reject is not None and (why := self.reject(body)) is not None:
            self.rejected.append(seen)
            err = {"error": {"message": why, "type": "invalid_request_error",
                             "param": None, "code": "invalid_value"}}
            return web.json_response(err, status=400)
        if self.refuse_image is not None and any(
                self.refuse_image(image_bytes(p)) for p in image_parts(body)):
            self.refused.append(seen)
            err = {"error": {"message": "You uploaded an unsupported image. Please make sure "
                             "your image is valid.", "type": "invalid_request_error",
                             "param": None, "code": "invalid_image_format"}}
            return web.json_response(err, status=400)
        if self._script:
            step = self._script.popleft()
        elif self.responder is not None:
            step = Text(self.responder(body))
        else:
            self.unexpected.append(seen)
            err = {"error": {"message": "FakeOpenAI: no scripted response", "type": "fake"}}
            return web.json_response(err, status=500, headers={"x-should-retry": "false"})
        if isinstance(step, Fault):
            step = self._fault(request, step)
        if isinstance(step, Error):
            is_json = isinstance(step.body, dict)
            text = json.dumps(step.body) if is_json else str(step.body or "")
            ct = "application/json" if is_json else "text/plain"
            return web.Response(
                text=text, status=step.status, headers=step.headers, content_type=ct
            )
        if isinstance(step, Hang):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), step.seconds)
            step = Text("(a late answer)")
        if self.latency is not None:
            await asyncio.sleep(self.latency(body))
        self._seq += 1
        head = {"id": f"chatcmpl-{self._seq}", "created": 1_700_000_000, "model": body.get("model")}
        if body.get("stream"):
            return await self._stream(request, body, head, step)
        if isinstance(step, Malformed):
            return web.Response(text=step.body, content_type="application/json")
        text = step.text if isinstance(step, Text) else ""
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        choices = [] if isinstance(step, EmptyChoices) else [choice]
        usage = _usage(body, text) if self.report_usage else {}
        return web.json_response(head | {"object": "chat.completion", "choices": choices} | usage)

    async def _stream(
        self, request: web.Request, body: JSON, head: JSON, step: Text | Malformed | EmptyChoices
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(data: str) -> None:
            await response.write(f"data: {data}\n\n".encode())

        def chunk(choices: list[JSON], **extra: Any) -> str:
            return json.dumps(
                head | {"object": "chat.completion.chunk"} | extra | {"choices": choices}
            )

        if isinstance(step, Malformed):
            await send(step.body)
        elif isinstance(step, Text):
            pieces = step.chunks if step.chunks is not None else re.findall(r"\s*\S+", step.text)
            await send(chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}]))
            for piece in pieces:
                if step.chunk_delay:
                    await asyncio.sleep(step.chunk_delay)
                await send(chunk([{"index": 0, "delta": {"content": piece}}]))
            await send(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        if self.report_usage and (body.get("stream_options") or {}).get("include_usage"):
            text = step.text if isinstance(step, Text) else ""
            await send(chunk([], **_usage(body, text)))
        await send("[DONE]")
        await response.write_eof()
        return response


async def _serve(host: str, port: int) -> None:
    async with FakeOpenAI(responder=default_responder, host=host, port=port, strict=False) as fake:
        print(fake.base_url, flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m tests.fakes.openai_server [--host H] [--port P]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.host, args.port))


if __name__ == "__main__":
    main()
