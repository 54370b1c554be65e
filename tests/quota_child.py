"""A separate OS process calling the model under a daily quota (multi-process tests).

``python -m tests.quota_child DATABASE_URL OPENAI_BASE_URL CHANNEL N LIMIT [KIND]``: opens a
real ``Runtime`` on the shared database, prints ``ready``, waits for ``go`` on stdin, then
makes N calls from the same person at once and prints one JSON line: how many were
answered by the model and the provider-reported tokens of each answered call. ``KIND``
``reply`` (default): N mentions under a user quota of LIMIT; ``catchup``: N ``/catchup``
commands under a server quota of LIMIT.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from bot.app import Runtime
from bot.catchup.command import Where
from bot.messages import IncomingMessage
from bot.settings import load_settings
from memory.models import ChannelKey
from tests.harness.chat import ask


async def main(url: str, base_url: str, channel: str, n: int, limit: int, kind: str) -> None:
    quota = "DAILY_TOKENS_PER_USER" if kind == "reply" else "DAILY_TOKENS_PER_SERVER"
    settings = load_settings({
        "DATABASE_URL": url, "OPENAI_BASE_URL": base_url, "MODEL_NAME": "gpt-test",
        "LLM_MAX_RETRIES": "0", "LLM_TIMEOUT": "10", quota: str(limit),
        "USER_RATE_LIMIT": "0",
    })
    key = ChannelKey("discord", "g1", channel)
    async with Runtime.open(settings) as rt:
        for i in range(3 if kind == "catchup" else 0):  # something to catch up on
            await ask(rt, IncomingMessage(
                key, f"{channel}-note-{i}", "bob", "Bob", f"ticket OPS-{i} is done",
                time.time() - 60))
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        if kind == "catchup":
            results = await asyncio.gather(*(
                rt.features.catchup_commands.catchup(Where(key), "alice", "1d") for _ in range(n)))
            answered = sum(1 for r in results if r.ok)
        else:
            replies = await asyncio.gather(*(
                ask(rt, IncomingMessage(
                    key, f"{channel}-{i}", "alice", "Alice", f"question {i} from {channel}",
                    time.time(), mentions_bot=True))
                for i in range(n)
            ))
            answered = sum(1 for r in replies if r is not None and not r.failed)
        purpose = "reply" if kind == "reply" else "digest"
        usages = [r.usage.total for r in rt.meter.records if r.purpose == purpose and r.ok]
        print(json.dumps({"answered": answered, "usages": usages}), flush=True)


if __name__ == "__main__":
    url, base_url, channel, n, limit = sys.argv[1:6]
    kind = sys.argv[6] if len(sys.argv) > 6 else "reply"
    asyncio.run(main(url, base_url, channel, int(n), int(limit), kind))
