"""A real ``Runtime`` against the loopback OpenAI fake on SQLite, and messages to feed it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bot.app import Runtime
from bot.messages import IncomingMessage
from bot.settings import load_settings
from memory.models import ChannelKey
from tests.fakes.openai_server import FakeOpenAI, is_summary_request

__all__ = ["KEY", "bodies", "msg", "runtime"]

KEY = ChannelKey("test", "w1", "c1")


def msg(
    i: int, text: str, *, author: str = "Alice", mention: bool = False, key: ChannelKey = KEY
) -> IncomingMessage:
    """Message ``m{i}`` from ``author`` (mentioning the bot when ``mention``)."""
    return IncomingMessage(
        key, f"m{i}", author.lower(), author, text, time.time(), mentions_bot=mention
    )


@contextlib.asynccontextmanager
async def runtime(tmp_path: Path, fake: FakeOpenAI, **env: str) -> AsyncIterator[Runtime]:
    """A runtime on ``tmp_path``/t.db whose models are served by ``fake``."""
    settings = load_settings(
        {
            "OPENAI_BASE_URL": fake.base_url,
            "MODEL_NAME": "gpt-test",
            "SUMMARY_MODEL_NAME": "gpt-test-mini",
            "DATABASE_URL": f"sqlite:///{tmp_path}/t.db",
            "LLM_MAX_RETRIES": "0",
            "LLM_TIMEOUT": "5",
            **env,
        }
    )
    async with Runtime.open(settings) as rt:
        yield rt


def bodies(fake: FakeOpenAI, *, summary: bool) -> list[dict[str, Any]]:
    """The JSON bodies ``fake`` received: summarizer requests, or the others."""
    out = [r.json for r in fake.chat_requests if r.json is not None]
    return [b for b in out if is_summary_request(b) == summary]
