"""A TCP proxy on loopback that resets connections on demand (network faults)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import Any

__all__ = ["ResettingProxy"]


class ResettingProxy:
    """A TCP proxy on loopback that answers the next ``resets`` requests with a TCP reset
    (RST: SO_LINGER 0 then close), whichever connection they arrive on, and pipes the rest."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.resets = 0
        self.reset_done = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        """The OpenAI base URL through the proxy."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> ResettingProxy:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    @staticmethod
    def _rst(writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            self._rst(writer)
            return

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, check: bool) -> None:
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while data := await src.read(65536):
                    if check and self.resets > 0:
                        self.resets -= 1
                        self.reset_done += 1
                        self._rst(writer)
                        up_w.transport.abort()
                        return
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        try:
            await asyncio.gather(pump(reader, up_w, True), pump(up_r, writer, False))
        finally:
            self._tasks.discard(task)

