"""A file worker that crashes mid-read (a parser's segfault, the kernel's OOM killer) costs
that one file: it becomes a line saying it could not be read, the dead process is reaped,
and the next file is read by a fresh worker. Files read at the same time in the pool's
other worker are not disturbed."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from bot.attachments.read import read_bytes
from bot.attachments.workers import Extractor
from bot.settings.sections import AttachmentSettings
from tests.harness.hostile import cpu_burning_pdf


async def busy_worker(workers: Extractor, within: float = 60.0) -> int:
    """The pid of a worker once one is alive (reading the file sent to it)."""
    deadline = time.monotonic() + within
    while not workers.pids:
        assert time.monotonic() < deadline, "no worker started"
        await asyncio.sleep(0.02)
    return workers.pids[0]


def reaped(pid: int) -> bool:
    """Whether ``pid`` is gone: a child not waited for would linger as a zombie, which
    signal 0 still reaches."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow  # starts worker processes
async def test_a_worker_crashing_mid_read_costs_one_file_and_the_pool_recovers() -> None:
    workers = Extractor(AttachmentSettings(attachment_timeout=300, attachment_cpu_seconds=300,
                                           attachment_workers=2))
    try:
        reading = asyncio.ensure_future(read_bytes(cpu_burning_pdf(), "application/pdf",
                                                   workers))
        pid = await busy_worker(workers)
        os.kill(pid, signal.SIGSEGV)  # as a parser's crash ends it
        crashed = await asyncio.wait_for(reading, 60)
        assert crashed.kind == "unreadable" and crashed.reason == "unreadable"
        assert pid not in workers.pids
        assert reaped(pid)  # waited for: no zombie left behind
        after = await asyncio.wait_for(read_bytes(b"after the crash\n", "text/plain", workers),
                                       60)
        assert after.text == "after the crash\n"  # a fresh worker read it
        assert workers.started == 2
    finally:
        await workers.close()
    assert workers.pids == []
