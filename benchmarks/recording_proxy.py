"""A thin recording proxy in front of a real OpenAI-compatible server (loopback only).

Every request is passed through unchanged and its answer streamed back as it arrives; the
proxy notes what the client asked (purpose, stream, ``max_tokens``, the body), when the
answer started and ended, how many content chunks the server sent (one a token on
llama.cpp), the server's ``usage``, and whether the client went away first. When the
client goes away mid-stream the proxy closes its upstream connection too, so the server
sees the same disconnect gistbot caused; what the server does next shows in the requests
that follow (how long they waited for the slot).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.openai_server import is_summary_request

__all__ = ["Call", "RecordingProxy"]

_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive",
        "accept-encoding"}


@dataclass
class Call:
    """One request through the proxy, as seen on the wire."""

    n: int
    path: str
    purpose: str  # "summary", "reply" (anything else on /chat/completions) or "other"
    stream: bool
    max_tokens: int | None
    body: dict[str, Any] | None
    started: float  # monotonic, when the request arrived
    first_chunk: float | None = None  # when the server's first answer bytes arrived
    ended: float | None = None
    chunks: int = 0  # content chunks (streamed) — about one a token on llama.cpp
    text: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    status: int | None = None
    finish_reason: str | None = None
    client_left: bool = False  # the client closed the connection before the answer ended

    @property
    def seconds(self) -> float | None:
        """Arrival to end (or to the client leaving)."""
        return None if self.ended is None else self.ended - self.started


class RecordingProxy:
    """``async with RecordingProxy(upstream) as proxy``: ``proxy.base_url`` forwards to
    ``upstream`` (a base URL ending in ``/v1``); ``proxy.calls`` is the record."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.calls: list[Call] = []
        self.base_url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> RecordingProxy:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        raw = await request.read()
        body: dict[str, Any] | None = None
        with contextlib.suppress(ValueError):
            body = json.loads(raw) if raw else None
        chat = request.path.endswith("/chat/completions") and isinstance(body, dict)
        purpose = "other"
        if chat and body is not None:
            purpose = "summary" if is_summary_request(body) else "reply"
        call = Call(
            n=len(self.calls), path=request.path, purpose=purpose,
            stream=bool(body and body.get("stream")),
            max_tokens=(body or {}).get("max_tokens") or (body or {}).get("max_completion_tokens"),
            body=body if chat else None, started=time.monotonic(),
        )
        self.calls.append(call)
        tail = request.path.removeprefix("/v1")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        resp = web.StreamResponse()
        up = await self._session.request(request.method, self.upstream + tail, data=raw,
                                         headers=headers)
        try:
            call.status = up.status
            resp.set_status(up.status)
            resp.content_type = up.content_type
            await resp.prepare(request)
            buffer = b""
            async for piece in up.content.iter_any():
                if call.first_chunk is None:
                    call.first_chunk = time.monotonic()
                buffer += piece
                if call.stream:
                    buffer = self._read_events(call, buffer)
                await resp.write(piece)
            if not call.stream:
                self._read_json(call, buffer)
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError, aiohttp.ClientConnectionError):
            call.client_left = True
            raise
        finally:
            call.ended = time.monotonic()
            up.close()  # not release(): an unread answer must end the upstream connection
        return resp

    @staticmethod
    def _read_events(call: Call, buffer: bytes) -> bytes:
        """Parse the complete server-sent events in ``buffer``; return the rest."""
        *events, rest = buffer.replace(b"\r\n", b"\n").split(b"\n\n")
        for event in events:
            for line in event.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    continue
                with contextlib.suppress(ValueError):
                    chunk = json.loads(data)
                    if chunk.get("usage"):
                        call.usage = chunk["usage"]
                    for choice in chunk.get("choices") or ():
                        delta = (choice.get("delta") or {}).get("content")
                        if delta:
                            call.chunks += 1
                            call.text += delta
                        call.finish_reason = choice.get("finish_reason") or call.finish_reason
        return rest

    @staticmethod
    def _read_json(call: Call, buffer: bytes) -> None:
        with contextlib.suppress(ValueError, AttributeError, IndexError, KeyError, TypeError):
            answer = json.loads(buffer)
            call.usage = answer.get("usage") or {}
            choice = answer["choices"][0]
            call.text = choice["message"]["content"] or ""
            call.finish_reason = choice.get("finish_reason")
