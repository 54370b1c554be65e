"""The process ``test_slack_crash.py`` kills: the real Slack adapter in HTTP mode, on a
real SQLite file, talking to the parent's loopback Slack.

Usage: ``python -m tests.slack_crash_child DB_PATH SLACK_API_URL [socket APP_TOKEN]``

It builds the runtime as ``gistbot run`` does (``Runtime.open`` from settings) and serves
``run_slack`` until killed. In HTTP mode it prints ``READY <events url>`` (flushed) once
it listens on its port-0 socket; in Socket Mode, ``READY socket`` once connected. The
language model is the harness's in-process fake (a short pause per reply word, so
replies are in flight when the kill lands). ``GISTBOT_TEST_KILL_AT`` makes it kill itself
at an exact point instead (``tests.harness.kill_points``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys

from adapters.slack import run_slack
from bot.app import Runtime
from bot.settings import load_settings
from tests.harness.kill_points import arm
from tests.harness.slack import SECRET, FakeLLM, web_client

__all__ = ["main"]


class _Ready(logging.Handler):
    """Prints ``READY <url>`` when the launcher logs where it listens or that it connected."""

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if m := re.search(r"listening on (\S+)", text):
            sys.stdout.write(f"READY {m.group(1)}\n")
            sys.stdout.flush()
        elif "Socket Mode" in text:
            sys.stdout.write("READY socket\n")
            sys.stdout.flush()


async def main(db: str, api_url: str, app_token: str | None) -> None:
    env = {
        "DATABASE_URL": f"sqlite:///{db}",
        "SLACK_BOT_TOKEN": "xoxb-test-token",
        "PORT": "0",
        "HOST": "127.0.0.1",
        "STREAM_REPLIES": "true",
        # A killed process's claim on a mention it was answering runs out in 2 s, so the
        # restarted one answers it soon (bot.missed.owed; the default is 30 s).
        "REPLY_CLAIM_SECONDS": "2",
        "USER_RATE_LIMIT": "0",  # one person sends every mention: no per-minute limit
    }
    if app_token is not None:
        env["SLACK_APP_TOKEN"] = app_token
    else:
        env["SLACK_SIGNING_SECRET"] = SECRET
    settings = load_settings(environ=env, env_file=None)
    launch = logging.getLogger("adapters.slack.launch")
    launch.setLevel(logging.INFO)
    launch.addHandler(_Ready())
    llm = FakeLLM()
    llm.pause = 0.01
    llm.echo = True  # so the parent can check each answer is to its own mention
    async with Runtime.open(settings, llm=llm) as rt:
        client = web_client(settings, api_url)
        arm(rt.storage, client)  # GISTBOT_TEST_KILL_AT: die at an exact point (tests only)
        await run_slack(rt.features, rt.settings, client=client)


if __name__ == "__main__":
    token = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "socket" else None
    asyncio.run(main(sys.argv[1], sys.argv[2], token))
