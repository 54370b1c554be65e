"""Soak: many messages over many channels through the Discord and Slack fakes at once, with
faults injected into 5% of the language-model calls and of the platform's send calls.

Afterwards: every acknowledged message is stored exactly once, each channel's messages are
stored in the order they were sent, every summary commit is consistent (the fold pointer
is within the stored turns, a summary exists once anything is folded, no error text was
stored as one), and resident memory after warm-up stayed flat.

CI runs a reduced size. The full size is::

    SOAK_MESSAGES=10000 SOAK_CHANNELS=500 .venv/bin/pytest tests/test_soak.py
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import random
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import discord
import psutil
import pytest
from aiohttp import web

from adapters.discord.launch import create_client
from adapters.slack.app import build_app
from adapters.slack.transport import serve_http
from bot.app import Runtime
from bot.settings import load_settings
from memory.models import ChannelKey
from tests.fakes.discord_server import FakeDiscord, Request
from tests.fakes.openai_server import Error, FakeOpenAI, Malformed, default_responder
from tests.fakes.slack_api import Answer, FakeSlack, api_error, rate_limited
from tests.harness.discord import TOKEN, W
from tests.harness.slack import SECRET, directory, event_body, make_adapter, sign

MESSAGES = int(os.environ.get("SOAK_MESSAGES", "2000"))
CHANNELS = int(os.environ.get("SOAK_CHANNELS", "100"))
FAULT_RATE = float(os.environ.get("SOAK_FAULT_RATE", "0.05"))
SEED = int(os.environ.get("SOAK_SEED", "8"))
RSS_GROWTH = 96 * 1024 * 1024  # generous: caches fill, the allocator keeps arenas


class FaultyOpenAI(FakeOpenAI):
    """The loopback OpenAI; a seeded ``rate`` of chat calls fail (500, 429, malformed)."""

    def __init__(self, rate: float, rng: random.Random) -> None:
        super().__init__(responder=default_responder)
        self.rate, self.rng, self.faults = rate, rng, 0

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if self.rng.random() < self.rate:
            self.faults += 1
            self._script.appendleft(self.rng.choice([
                Error(500, {"error": {"message": "overloaded", "type": "server_error"}}),
                Error(429, {"error": {"message": "slow down", "type": "requests"}}),
                Malformed(),
            ]))
        return await super()._chat(request)


class FaultyDiscord(FakeDiscord):
    """The loopback Discord; a seeded ``rate`` of message sends and typing calls fail."""

    def __init__(self, rate: float, rng: random.Random) -> None:
        super().__init__()
        self.rate, self.rng, self.faults = rate, rng, 0

    async def _answer(self, r: Request) -> tuple[int, Any]:
        if r.method == "POST" and r.path.startswith("/channels/") and self.rng.random() < self.rate:
            self.faults += 1
            return self.rng.choice([(403, {"message": "Missing Permissions", "code": 50013}),
                                    (400, {"message": "Invalid Form Body", "code": 50035})])
        return await super()._answer(r)


class FaultySlack(FakeSlack):
    """The loopback Slack; a seeded ``rate`` of posts and updates fail (429, errors)."""

    def __init__(self, rate: float, rng: random.Random) -> None:
        super().__init__()
        self.rate, self.rng, self.faults = rate, rng, 0

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if method in ("chat.postMessage", "chat.update") and self.rng.random() < self.rate:
            self.faults += 1
            answer: Answer = self.rng.choice([rate_limited(0), api_error("invalid_auth"),
                                              api_error("internal_error")])
            self._scripts[method].appendleft(answer)
        return await super()._api(request)


class Finished:
    """Counts messages the service received (``receive`` returned), per platform, and wakes
    waiters."""

    def __init__(self, rt: Runtime) -> None:
        self.done: Counter[str] = Counter()
        self.changed = asyncio.Condition()
        inner = rt.service.receive

        async def counted(msg: Any, **kwargs: Any) -> Any:
            try:
                return await inner(msg, **kwargs)
            finally:
                self.done[msg.key.platform] += 1
                async with self.changed:
                    self.changed.notify_all()

        rt.service.receive = counted  # type: ignore[method-assign]

    async def until(self, platform: str, n: int, within: float) -> None:
        async with asyncio.timeout(within), self.changed:
            await self.changed.wait_for(lambda: self.done[platform] >= n)


def plan(rng: random.Random) -> list[tuple[str, int, int, bool]]:
    """(platform, channel index, message number, mentions the bot), in send order."""
    out = []
    for n in range(MESSAGES):
        platform = "discord" if n % 2 == 0 else "slack"
        out.append((platform, rng.randrange(CHANNELS), n, rng.random() < 0.2))
    return out


def discord_channel(i: int) -> int:
    return 600_000_000_000_000_000 + i


@contextlib.asynccontextmanager
async def world(tmp_path: Path, rng: random.Random) -> AsyncIterator[dict[str, Any]]:
    async with FaultyOpenAI(FAULT_RATE, rng) as llm, FaultyDiscord(FAULT_RATE, rng) as dfake, \
            FaultySlack(FAULT_RATE, rng) as sfake, aiohttp.ClientSession() as http:
        directory(sfake)
        mp = pytest.MonkeyPatch()
        mp.setattr(discord.http.Route, "BASE", dfake.api_base)
        mp.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", dfake.gateway_url)
        settings = load_settings({
            "OPENAI_BASE_URL": llm.base_url, "MODEL_NAME": "gpt-test", "LLM_MAX_RETRIES": "0",
            "LLM_TIMEOUT": "10", "DATABASE_URL": f"sqlite:///{tmp_path / 'soak.db'}",
            "SQLITE_SYNCHRONOUS": "NORMAL", "MAX_HISTORY_MESSAGES": "6",
            "KEEP_RECENT_MESSAGES": "2", "USER_RATE_LIMIT": "0", "LOG_LEVEL": "WARNING",
            "DISCORD_TOKEN": TOKEN, "SLACK_BOT_TOKEN": "xoxb-test-token",
            "SLACK_SIGNING_SECRET": SECRET,
        }, env_file=None)
        try:
            async with Runtime.open(settings) as rt:
                finished = Finished(rt)
                client = create_client(rt.features, rt.settings,
                                       guild_ready_timeout=0.05, max_messages=200)
                adapter = make_adapter(rt, sfake.api_url)
                async with client, serve_http(build_app(adapter), "127.0.0.1",
                                              0) as url:
                    task = asyncio.create_task(client.start(TOKEN))
                    try:
                        await asyncio.wait_for(client.wait_until_ready(), 10)
                        yield {"rt": rt, "finished": finished, "adapter": adapter, "url": url,
                               "client": client,
                               "http": http, "discord": dfake, "slack": sfake, "llm": llm}
                    finally:
                        await adapter.close(within=10)
                        await client.close()
                        with contextlib.suppress(asyncio.CancelledError):
                            await asyncio.wait_for(task, 5)
                        await rt.memory.close(grace=0.5)  # compactions in backoff: stop now
        finally:
            mp.undo()


async def post_event(w: dict[str, Any], event: dict[str, Any], event_id: str) -> int:
    body = json.dumps(event_body(event, event_id=event_id))
    headers = {"Content-Type": "application/json", **sign(body)}
    async with w["http"].post(w["url"], data=body.encode(), headers=headers) as r:
        return int(r.status)


async def replies_done(client: Any, within: float) -> None:
    """Wait until the Discord client's message handlers (each a reply in flight) ended."""
    async with asyncio.timeout(within):
        while busy := [t for t in client._replying if not t.done()]:
            await asyncio.wait(busy)


@pytest.mark.slow
async def test_soak(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    steps = plan(random.Random(SEED + 1))
    proc = psutil.Process()
    async with world(tmp_path, rng) as w:
        rt: Runtime = w["rt"]
        fake_discord: FakeDiscord = w["discord"]
        finished: Finished = w["finished"]
        # Warm the Slack user directory so names are cached (as in a running workspace).
        for user in ("U1", "U2"):
            assert await post_event(w, {"type": "message", "user": user, "text": "hi",
                                        "ts": f"1600000000.00000{user[1]}", "channel": "CWARM",
                                        "channel_type": "channel"}, f"warm{user}") == 200
        await w["adapter"].drain(within=30)

        sent: dict[ChannelKey, list[str]] = defaultdict(list)
        acked: set[tuple[ChannelKey, str]] = set()
        slack_queues: dict[int, list[tuple[int, bool]]] = defaultdict(list)
        discord_sent = 0
        warm_at = len(steps) // 5
        rss_warm = 0
        for i, (platform, ch, n, mention) in enumerate(steps):
            if i == warm_at:
                await finished.until("discord", discord_sent, within=120)
                gc.collect()
                rss_warm = proc.memory_info().rss
            if platform == "slack":
                slack_queues[ch].append((n, mention))
                continue
            key = ChannelKey("discord", str(W.guild_id), str(discord_channel(ch)))
            author = W.alice if n % 3 else W.bob
            text = f"message {n} in channel {ch}: order ORD-{n} is packed"
            extra: dict[str, Any] = {}
            if mention:
                text, extra = f"<@{W.bot_id}> {text}", {"mentions": [W.bot_user]}
            data = await fake_discord.send_message(discord_channel(ch), author, text, **extra)
            sent[key].append(data["id"])
            acked.add((key, data["id"]))
            discord_sent += 1
            if discord_sent % 50 == 0:
                await asyncio.sleep(0)  # let the client breathe, as a real gateway would

        async def slack_channel(ch: int) -> None:
            key = ChannelKey("slack", "T0TEAM", f"C{ch}")
            for n, mention in slack_queues[ch]:
                ts = f"{1700000000 + n}.{n % 1000000:06d}"
                text = f"message {n} in channel {ch}: ticket T-{n} is open"
                event = {"type": "message", "user": "U1" if n % 3 else "U2",
                         "text": f"<@UBOT> {text}" if mention else text, "ts": ts,
                         "channel": f"C{ch}", "channel_type": "channel"}
                sent[key].append(ts)
                if await post_event(w, event, f"Ev{n}") == 200:
                    acked.add((key, ts))

        gate = asyncio.Semaphore(32)

        async def limited(ch: int) -> None:
            async with gate:
                await slack_channel(ch)

        await asyncio.gather(*(limited(ch) for ch in slack_queues))
        await finished.until("discord", discord_sent, within=300)
        assert await w["adapter"].drain(within=300)
        await replies_done(w["client"], within=300)  # received is not yet answered
        gc.collect()
        rss_end = proc.memory_info().rss

        # ---- every acknowledged message stored exactly once, in per-channel order
        total = 0
        for key, ids in sent.items():
            stored = await rt.store.turns(key, limit=1_000_000)
            user = [t.message_id for t in stored if t.role == "user"]
            counts = Counter(user)
            assert all(c == 1 for c in counts.values()), f"duplicates in {key}"
            expected = [m for m in ids if (key, m) in acked]
            assert user == expected, f"order or loss in {key}"
            replies = Counter(t.message_id for t in stored if t.role == "assistant")
            assert all(c == 1 for c in replies.values())
            assert all(r.removeprefix("reply:") in counts for r in replies)
            seqs = [t.seq for t in stored]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
            # ---- every summary commit consistent
            state = await rt.store.state(key)
            assert 0 <= state.folded_through <= (max(seqs) if seqs else 0)
            if state.folded_through:
                assert state.text.strip(), f"folded without a summary in {key}"
                assert not state.text.lstrip().lower().startswith(("error", "{", "<"))
            stats = await rt.store.stats(key)
            assert stats.turns == len(stored)
            total += len(user)
        assert total == len(acked) and len(acked) >= 0.99 * MESSAGES
        assert w["llm"].faults and w["discord"].faults and w["slack"].faults  # faults happened
        assert rt.memory.compactions > 0

    # ---- resident memory flat after warm-up
    growth = rss_end - rss_warm
    assert growth < max(RSS_GROWTH, rss_warm // 2), (
        f"RSS grew {growth / 2**20:.0f} MiB after warm-up ({rss_warm / 2**20:.0f} MiB)")

