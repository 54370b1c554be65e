"""The offline model's reply counts the people's recent messages, not its own replies."""

from __future__ import annotations

import io
from pathlib import Path

from adapters.console_adapter import ConsoleChat
from bot.app import Runtime
from bot.settings import load_settings


async def test_recent_messages_are_the_peoples(tmp_path: Path) -> None:
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path / 'o.db'}"})
    out = io.StringIO()
    async with Runtime.open(settings) as rt:
        chat = ConsoleChat(rt.features, user="ana", stdin=io.StringIO(), stdout=out)
        for text in ("hello", "the order is ORD-7", "what do you see?"):
            await chat.handle(text)
    last = out.getvalue().splitlines()[-1]
    assert "I can also see 3 recent messages." in last  # not 5: two were the bot's
