"""Daily quotas are reservations (``bot.channels.quota``): many people calling the model at
once never take a server past its limit — 27 mentions through the real ``discord.py``
against the loopback Discord, and replies, ``/summary`` and ``/catchup`` together through
the service — on SQLite and PostgreSQL. A call that fails, or is cancelled, gives its
reservation back; one left by a killed process holds until it expires, then is reclaimed.
The model is the real ``openai`` SDK against the loopback OpenAI fake."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest

from bot.app import Runtime
from bot.catchup.command import Where
from bot.channels import quota as quota_module
from bot.channels.quota import RESERVATION_TTL
from bot.conversation.reply_flow import PendingReply
from bot.stores.usage import UsageKey
from memory.errors import StoreUnavailableError
from tests.fakes.discord_server import FakeDiscord, user
from tests.fakes.openai_server import Error, FakeOpenAI, Hang, Text, default_responder
from tests.harness.chat import ask
from tests.harness.deadlines import scaled
from tests.harness.discord import W, make_settings, mention, running
from tests.harness.postgres import fresh_schema
from tests.harness.service import KEY, msg, runtime

LIMIT = 3000
SERVER = UsageKey("test", "w1")


@pytest.fixture(params=["sqlite", "postgres"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A ``DATABASE_URL``: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/gistbot.db"
        return
    async with fresh_schema("gistbot_quota") as url:
        yield url


@pytest.fixture
async def slow_llm() -> AsyncIterator[FakeOpenAI]:
    """The model endpoint, taking a moment per answer so that calls overlap."""
    async with FakeOpenAI(responder=default_responder, latency=lambda _: 0.2) as fake:
        yield fake


async def used_today(rt: Runtime, account: UsageKey) -> int:
    """``account``'s count today, with what the process has not written yet."""
    await rt.features.quota.flush()
    return (await rt.storage.usage.tokens_used(rt.features.quota.day(), [account]))[account]


def counting_refusals(rt: Runtime) -> list[str]:
    """The people the quota refuses from now on (each refusal, in order)."""
    refused: list[str] = []
    original = rt.features.quota.refused

    async def refused_and_counted(error: Any, key: Any, user_id: str) -> Any:
        refused.append(user_id)
        return await original(error, key, user_id)

    rt.features.quota.refused = refused_and_counted  # type: ignore[method-assign]
    return refused


async def test_27_discord_mentions_at_once_stay_within_the_servers_limit(
    tmp_path: Path, discord_fake: FakeDiscord, slow_llm: FakeOpenAI, database: str
) -> None:
    settings = make_settings(tmp_path, slow_llm, DAILY_TOKENS_PER_SERVER=str(LIMIT),
                             DATABASE_URL=database, USER_RATE_LIMIT="0")
    async with running(settings) as (rt, client, watch):
        delivered: list[bool] = []
        deliver = client.flow.deliver

        async def counted(pending: PendingReply) -> bool:
            ok = await deliver(pending)
            delivered.append(ok)
            return ok

        client.flow.deliver = counted  # type: ignore[method-assign]
        refused = counting_refusals(rt)
        people = [user(400_000_000_000_000_000 + i, f"person{i}") for i in range(27)]
        await asyncio.gather(*(discord_fake.send_message(W.general, p, mention(f"question {i}"))
                               for i, p in enumerate(people)))

        async def all_handled() -> bool:
            return len(delivered) == 27

        await watch.until(all_handled, within=scaled(120))
        server = UsageKey("discord", str(W.guild_id))
        used = await used_today(rt, server)
        answered = [r for r in rt.meter.records if r.purpose == "reply" and r.ok]
        assert used == sum(r.usage.total for r in answered)  # every answer counted
        assert used <= LIMIT, (used, len(answered))
        assert len(answered) >= 2 and len(refused) >= 1  # it answered, then refused
        assert len(answered) + len(refused) == 27


async def test_replies_summaries_and_catchups_at_once_stay_within_the_limit(
    tmp_path: Path, slow_llm: FakeOpenAI, database: str
) -> None:
    async with runtime(tmp_path, slow_llm, DAILY_TOKENS_PER_SERVER=str(LIMIT),
                       DATABASE_URL=database, USER_RATE_LIMIT="0") as rt:
        for i in range(3):
            await ask(rt, msg(i, f"ticket OPS-{i} is done", author=f"P{i}"))
        refused = counting_refusals(rt)
        calls: list[Awaitable[Any]] = []
        for i in range(8):
            calls.append(ask(rt, msg(10 + i, f"what about OPS-{i}?",
                                     author=f"Q{i}", mention=True)))
            calls.append(rt.features.memory_commands.summary(KEY, f"s{i}"))
            calls.append(rt.features.catchup_commands.catchup(Where(KEY), f"c{i}", "1d"))
        results = await asyncio.gather(*calls)
        commands_refused = sum(1 for r in results if hasattr(r, "ok") and not r.ok)
        used = await used_today(rt, SERVER)
        assert used <= LIMIT, used
        assert commands_refused + len(refused) >= 1  # the limit was reached
        assert len([r for r in rt.meter.records if r.ok]) >= 3


async def reserve_everything(rt: Runtime, tokens: int = LIMIT) -> bool:
    """Whether ``tokens`` can be reserved on the server under ``LIMIT`` now."""
    rid = uuid.uuid4().hex
    now = rt.features.quota.clock()
    refusal = await rt.storage.usage.reserve_tokens(
        rt.features.quota.day(), {SERVER: LIMIT}, tokens, rid=rid, now=now,
        expires_at=now + RESERVATION_TTL)
    if refusal is None:
        await rt.storage.usage.settle_tokens(rid, rt.features.quota.day(), [SERVER], 0)
    return refusal is None


@pytest.mark.parametrize("failure", [
    Error(500, {"error": {"message": "boom"}}, {"x-should-retry": "false"}),
    Error(429, {"error": {"message": "slow down"}}, {"retry-after": "1"}),
    Error(400, {"error": {"message": "bad image"}}),
], ids=["500", "429", "400"])
async def test_a_reply_that_fails_settles_to_zero(tmp_path: Path, failure: Error) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, runtime(
            tmp_path, fake, DAILY_TOKENS_PER_SERVER=str(LIMIT)) as rt:
        fake.push(failure)
        reply = await ask(rt, msg(1, "are you there?", mention=True))
        assert reply is not None and reply.failed
        assert await used_today(rt, SERVER) == 0
        assert await reserve_everything(rt)  # its reservation was given back
        reply = await ask(rt, msg(2, "and now?", mention=True))
        assert reply is not None and not reply.failed
        assert 0 < await used_today(rt, SERVER) < LIMIT
        assert await reserve_everything(rt, LIMIT - await used_today(rt, SERVER))


async def test_a_reply_cancelled_mid_call_gives_its_reservation_back(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, runtime(
            tmp_path, fake, DAILY_TOKENS_PER_SERVER=str(LIMIT)) as rt:
        fake.push(Hang(30))
        task = asyncio.ensure_future(ask(rt, msg(1, "slow one", mention=True)))
        deadline = time.monotonic() + scaled(10)
        while not fake.chat_requests:  # the call is admitted and on the wire
            assert time.monotonic() < deadline, "the reply never reached the model"
            await asyncio.sleep(0.02)
        assert not await reserve_everything(rt)  # held by the call in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await reserve_everything(rt)
        assert await used_today(rt, SERVER) == 0  # nothing was reported as used


async def test_a_reply_stream_cut_short_counts_what_it_spent_and_releases_the_rest(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, runtime(
            tmp_path, fake, DAILY_TOKENS_PER_SERVER=str(LIMIT)) as rt:
        fake.push(Text("one two three four five six seven eight", chunk_delay=0.2))
        with rt.features.quota.paying(KEY, "reply", "alice"):
            stream = cast(AsyncGenerator[str, None], rt.llm.stream(
                [{"role": "user", "content": "count slowly, please"}], max_tokens=100,
                purpose="reply"))
            got = [await anext(stream), await anext(stream)]
            await stream.aclose()  # the person's reply was cut short (a shutdown, say)
        assert "".join(got).split() == ["one", "two"]
        used = await used_today(rt, SERVER)
        assert used >= 2 + 5  # two pieces and the prompt, estimated: no usage was reported
        assert await reserve_everything(rt, LIMIT - used)  # the rest was released


async def plant(rt: Runtime, tokens: int, *, expires_in: float) -> None:
    """A reservation as a process killed between reserving and settling leaves it."""
    now = rt.features.quota.clock()
    refusal = await rt.storage.usage.reserve_tokens(
        rt.features.quota.day(), {SERVER: LIMIT}, tokens, rid=uuid.uuid4().hex,
        now=now - RESERVATION_TTL, expires_at=now + expires_in)
    assert refusal is None


async def test_a_reservation_left_by_a_killed_process_holds_until_it_expires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quota_module, "WAIT_AT_MOST", 0.3)  # wait briefly, then refuse
    async with FakeOpenAI(responder=default_responder) as fake, runtime(
            tmp_path, fake, DAILY_TOKENS_PER_SERVER=str(LIMIT)) as rt:
        await plant(rt, LIMIT, expires_in=RESERVATION_TTL)
        refused = counting_refusals(rt)
        await ask(rt, msg(1, "anyone?", mention=True))
        assert refused == ["alice"] and fake.chat_requests == []

        clock: Callable[[], float] = rt.features.quota.clock
        rt.features.quota.clock = lambda: clock() + RESERVATION_TTL  # it has expired now
        reply = await ask(rt, msg(2, "anyone now?", mention=True))
        assert reply is not None and not reply.failed
        assert len(fake.chat_requests) == 1
        assert 0 < await used_today(rt, SERVER) < LIMIT  # the stale hold is gone


async def test_without_the_database_a_call_goes_ahead_and_is_counted_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, runtime(
            tmp_path, fake, DAILY_TOKENS_PER_SERVER=str(LIMIT)) as rt:
        async def unreachable(*args: Any, **kwargs: Any) -> None:
            raise StoreUnavailableError("connection lost", "the server went away")

        monkeypatch.setattr(rt.storage.usage, "reserve_tokens", unreachable)
        reply = await ask(rt, msg(1, "are you there?", mention=True))
        assert reply is not None and not reply.failed  # not an over-quota notice
        assert 0 < await used_today(rt, SERVER) < LIMIT  # counted when it ended
