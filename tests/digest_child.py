"""A separate OS process running the digest scheduler on a shared store (exactly-once
tests).

``python -m tests.digest_child STORE POSTS CLOCK GO TICKS [SLACK_API CLAIM_TTL]`` where
STORE is a SQLite path or ``postgresql://…#schema``; the scheduler's clock reads CLOCK (unix
seconds) plus the time since start; it waits until the file GO exists (so racing processes
start together), ticks TICKS times, and appends ``<pid> <channel> <first line>`` to POSTS
for every digest it posts on Discord. With SLACK_API, Slack channels' digests go to that
(loopback) Slack through the real outlet and the outbox, claims lasting CLAIM_TTL seconds,
and ``GISTBOT_TEST_KILL_AT`` may kill the process at an exact point
(``tests.harness.kill_points``). The model is the offline one (extractive digests).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bot.catchup.command import Catchups, Where
from bot.catchup.digests import DigestScheduler
from bot.catchup.gather import Catchup
from bot.llm.offline import OfflineLLM
from memory.models import ChannelKey
from memory.tokens import TokenCounter
from tests.compaction_child import open_storage
from tests.harness.kill_points import arm


class FileOutlet:
    """Posts by appending a line to a file shared with the parent."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def where(self, key: ChannelKey) -> Where:
        return Where(key)

    async def post(self, key: ChannelKey, text: str, *, slot_at: float,
                   in_thread: bool = False) -> None:
        await asyncio.to_thread(self._append, f"{os.getpid()} {key.channel} {text.splitlines()[0]}")

    def _append(self, line: str) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


async def _wait_for(path: Path, within: float = 60.0) -> None:
    """Poll until ``path`` exists (the parent's start signal); TimeoutError past ``within``
    seconds, so a parent that died never leaves this child waiting."""
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(path.exists):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no start signal at {path} within {within:g} s")
        await asyncio.sleep(0.01)


def slack_outlet(store: Any, api_url: str) -> Any:
    """The real Slack digest outlet, through the outbox, against the loopback Slack."""
    from slack_sdk.web.async_client import AsyncWebClient

    from adapters.slack.catchup import Permalinks, SlackOutlet
    from adapters.slack.users import UserDirectory
    from bot.conversation.outbox import Outbox

    client = AsyncWebClient(token="xoxb-test-token", base_url=api_url)
    return SlackOutlet(client, UserDirectory(client), Permalinks(client), Outbox(store))


async def main(spec: str, posts: str, clock: float, go: str, ticks: int,
               slack_api: str = "", claim_ttl: float = 600.0) -> None:
    storage = open_storage(spec)
    await storage.open()
    arm(storage)  # GISTBOT_TEST_KILL_AT: die at an exact point (tests only)
    store = storage.memory
    tok = TokenCounter("gpt-4o")
    started = time.monotonic()
    catchups = Catchups(Catchup(store, OfflineLLM(tok), tok), store, ZoneInfo("UTC"))
    scheduler = DigestScheduler(storage.digests, catchups, claim_ttl=claim_ttl,
                                clock=lambda: clock + time.monotonic() - started)
    scheduler.add_outlet("discord", FileOutlet(posts))
    if slack_api:
        scheduler.add_outlet("slack", slack_outlet(storage.outbox, slack_api))
    try:
        await _wait_for(Path(go))
        for _ in range(ticks):
            await scheduler.tick()
    finally:
        await storage.close()
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4],
                     int(sys.argv[5]), *sys.argv[6:7], *map(float, sys.argv[7:8])))
