"""The Discord harness: a real discord.py client against the loopback Discord
(tests/fakes/discord_server.py), the real ``ChatService`` on SQLite, and real discord.py
objects built from gateway payloads for the pure parts.

Fixtures built from these (``discord_fake``, ``discord_llm``, ``objects``) are in
``tests/conftest.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import discord
import pytest

from adapters.discord.client import GistbotClient
from adapters.discord.commands import ANSWERED_PRIVATELY
from adapters.discord.launch import create_client
from adapters.discord.text import channel_key
from bot.app import Runtime
from bot.commands.declare import Registry
from bot.conversation.reply_flow import ReplyFlow
from bot.conversation.service import ChatService
from bot.features.registry import COMMANDS
from bot.settings import Settings, load_settings
from memory.models import ChannelKey
from tests.fakes.discord_server import FakeDiscord, Request, World, message
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.deadlines import scaled

__all__ = [
    "GENERAL",
    "TOKEN",
    "Objects",
    "W",
    "Watch",
    "fence_lines",
    "followup_to",
    "has_turns",
    "loopback_discord",
    "make_settings",
    "mention",
    "posted",
    "running",
    "turns",
]

TOKEN = "fake-discord-token"
W = World()
GENERAL = channel_key(W.guild_id, W.general)
FENCE_LINE = re.compile(r"^ {0,3}```", re.MULTILINE)


async def _identify_at_once(self: discord.Client, shard_id: int | None, *,
                            initial: bool = False) -> None:
    """discord.py waits 5 s before every IDENTIFY but a session's first, for Discord's
    identify rate limit; the fake has none, so a reconnect or a second shard goes at once."""


@contextlib.asynccontextmanager
async def loopback_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """The loopback Discord, with discord.py pointed at it (tests only)."""
    async with FakeDiscord() as fake:
        monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base)
        monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", fake.gateway_url)
        monkeypatch.setattr(discord.Client, "before_identify_hook", _identify_at_once)
        yield fake


def make_settings(tmp_path: Path, llm: FakeOpenAI, **env: str) -> Settings:
    """Discord settings with the model at ``llm`` and memory under ``tmp_path``."""
    return load_settings(
        {
            "DISCORD_TOKEN": TOKEN,
            "OPENAI_BASE_URL": llm.base_url,
            "MODEL_NAME": "gpt-test",
            "LLM_MAX_RETRIES": "0",
            "LLM_TIMEOUT": "5",
            "DATABASE_URL": f"sqlite:///{tmp_path}/gistbot.db",
            **env,
        },
        env_file=None,
    )


class Watch:
    """Wakes waiters each time the service has finished handling an event (or the client's
    reply flow a reply), so tests wait on events (with a deadline) instead of polling the
    store."""

    def __init__(self, service: ChatService) -> None:
        self._changed = asyncio.Condition()
        self.finished: Counter[str] = Counter()  # calls finished, by method name
        for name in ("receive", "edited", "deleted"):
            setattr(service, name, self._wrap(getattr(service, name)))

    def replies(self, flow: ReplyFlow) -> None:
        """Wake waiters after each reply ``flow`` delivered too."""
        flow.deliver = self._wrap(flow.deliver)  # type: ignore[method-assign]

    def _wrap(self, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            try:
                return await method(*args, **kwargs)
            finally:
                self.finished[method.__name__] += 1
                async with self._changed:
                    self._changed.notify_all()

        return wrapped

    async def handled(self, n: int, within: float = 5.0) -> None:
        """Return once the service has finished handling ``n`` messages (answered or not)."""

        async def done() -> bool:
            return self.finished["receive"] >= n

        await self.until(done, within)

    async def until(self, check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
        """Return once ``check()`` holds; ``TimeoutError`` after ``within`` seconds."""
        async with asyncio.timeout(scaled(within)), self._changed:
            while not await check():
                await self._changed.wait()


@contextlib.asynccontextmanager
async def running(
    settings: Settings, *, backfill: bool = False, commands: Registry = COMMANDS
) -> AsyncIterator[tuple[Runtime, GistbotClient, Watch]]:
    """A runtime and a connected client that has seen READY; both closed on exit. With
    ``backfill`` the client reads back what it missed (given the store, as ``gistbot run``);
    ``commands``: the registry it offers."""
    async with Runtime.open(settings) as rt:
        watch = Watch(rt.service)
        client = create_client(rt.features, rt.settings,
                               history=rt.storage.history() if backfill else None,
                               guild_ready_timeout=0.05, commands=commands)
        watch.replies(client.flow)
        async with client:
            task = asyncio.create_task(client.start(TOKEN))
            try:
                await asyncio.wait_for(client.wait_until_ready(), 10)
                yield rt, client, watch
            finally:
                await client.close()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait_for(task, 5)


async def turns(rt: Runtime, key: ChannelKey = GENERAL) -> list[tuple[str, str, str]]:
    """(role, author, text) of each stored turn of ``key``."""
    return [(t.role, t.author_name, t.text) for t in await rt.store.turns(key)]


async def has_turns(rt: Runtime, n: int, key: ChannelKey = GENERAL) -> bool:
    """At least ``n`` turns are stored for ``key``."""
    return len(await rt.store.turns(key)) >= n


def mention(text: str) -> str:
    """``text`` addressed to the bot."""
    return f"<@{W.bot_id}> {text}"


async def posted(fake: FakeDiscord, channel_id: int, n: int = 1) -> list[Request]:
    """Wait for the bot's ``n``-th message in a channel; return all of them."""
    return list(
        await fake.wait_for(lambda f: len(f.sent_to(channel_id)) >= n and f.sent_to(channel_id))
    )


async def followup_to(fake: FakeDiscord, inter: dict[str, Any]) -> Request:
    """Wait for the answer to interaction ``inter``: its first follow-up message, or the
    answer put into its deferred response (a public one), whichever comes first."""
    path = f"/webhooks/{W.app_id}/{inter['token']}"

    def answers(f: FakeDiscord) -> list[Request]:
        return [r for r in f.requests if r.path.startswith(path) and (
            (r.method == "POST" and r.path == path) or (
                r.method == "PATCH" and r.path == f"{path}/messages/@original"
                and (r.json or {}).get("content") != ANSWERED_PRIVATELY))]

    reqs = await fake.wait_for(answers)
    return reqs[0]  # type: ignore[no-any-return]


def fence_lines(text: str) -> int:
    """How many code-fence lines ``text`` has."""
    return len(FENCE_LINE.findall(text))


class Objects:
    """Real discord.py objects from gateway payloads, through a client's own state."""

    def __init__(self) -> None:
        self.client = discord.Client(intents=discord.Intents.default())
        self.state = self.client._connection
        self.state._add_guild(discord.Guild(data=W.guild_create(), state=self.state))  # type: ignore[arg-type]

    def message(
        self, channel_id: int, author: dict[str, Any], content: str, **kwargs: Any
    ) -> discord.Message:
        data = message(W, channel_id, author, content, **kwargs)
        channel, _ = self.state._get_guild_channel(data)  # type: ignore[arg-type]
        return discord.Message(state=self.state, channel=channel, data=data)  # type: ignore[arg-type]
