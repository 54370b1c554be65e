"""The faults a loopback fake can put on any endpoint, in one vocabulary for all of them.

A fake takes a fault through its script (``FakeSlack.script``, ``FakeDiscord.script``): the
next call of an endpoint is answered with it instead of normally. The faults are the ways a
call across a network ends badly, split by whether the call took effect:

- ``BEFORE``: refused with HTTP 500 before anything happened (nothing to find afterwards);
- ``AFTER_500``: done, then answered HTTP 500 (the caller cannot tell it from ``BEFORE``);
- ``AFTER_RESET``: done, then the connection is reset (TCP RST, no answer at all);
- ``AFTER_HANG``: done, then no answer until the fake closes (the caller's timeout ends it);
- ``RATE_LIMITED``: HTTP 429 with ``Retry-After``, not done (the platform says "later").

``cut`` ends a request the way an ``AFTER_RESET`` or ``AFTER_HANG`` fault says.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from enum import StrEnum

from aiohttp import web

__all__ = ["FAULTS", "Fault", "cut", "reset"]


class Fault(StrEnum):
    """One fault on one call (see the module docstring)."""

    BEFORE = "before"
    AFTER_500 = "500"
    AFTER_RESET = "reset"
    AFTER_HANG = "hang"
    RATE_LIMITED = "429"

    @property
    def performs(self) -> bool:
        """Whether the call takes effect before it fails."""
        return self in (Fault.AFTER_500, Fault.AFTER_RESET, Fault.AFTER_HANG)

    @property
    def cuts(self) -> bool:
        """Whether the call gets no HTTP answer at all (reset, hang)."""
        return self in (Fault.AFTER_RESET, Fault.AFTER_HANG)


FAULTS = tuple(Fault)


def reset(request: web.Request) -> None:
    """Reset the request's connection: SO_LINGER 0, then close (the peer reads an RST)."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def cut(request: web.Request, fault: Fault, closing: asyncio.Event) -> web.Response:
    """End ``request`` without an answer: reset now, or hang until ``closing`` is set (the
    fake is leaving); the response returned is never read by anyone."""
    if fault is Fault.AFTER_RESET:
        reset(request)
    else:
        await closing.wait()
        reset(request)
    return web.Response(status=500)
