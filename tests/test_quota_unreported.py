"""A model server that reports no usage is still metered: an OpenAI-compatible server
(some proxies, older local servers) may answer a chat completion without ``usage``. Counted
as zero, every call would be free and the daily limit never reached; the quota counts the
call's estimate instead (``bot.llm.cost``), streamed or not, on SQLite and PostgreSQL.

The real ``openai`` SDK against the loopback OpenAI fake, through the service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app import Runtime
from bot.catchup.command import Where
from bot.stores.usage import UsageKey
from tests.fakes.openai_server import FakeOpenAI, Text, default_responder
from tests.harness.chat import ask
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
    async with fresh_schema("gistbot_unreported") as url:
        yield url


async def used_today(rt: Runtime) -> int:
    """The server's count today, with what the process has not written yet."""
    await rt.features.quota.flush()
    return (await rt.storage.usage.tokens_used(rt.features.quota.day(), [SERVER]))[SERVER]


async def test_replies_and_catchups_without_reported_usage_still_reach_the_limit(
    tmp_path: Path, database: str
) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, runtime(
            tmp_path, fake, DAILY_TOKENS_PER_SERVER=str(LIMIT), DATABASE_URL=database,
            USER_RATE_LIMIT="0") as rt:
        fake.report_usage = False
        reply = await ask(rt, msg(1, "ticket OPS-1 is done", mention=True))
        assert reply is not None and not reply.failed
        after_reply = await used_today(rt)
        assert after_reply > 0  # the reply's prompt and answer, estimated
        done = await rt.features.catchup_commands.catchup(Where(KEY), "u1", "1d")
        assert done.ok
        assert await used_today(rt) > after_reply  # the catch-up's too
        answered = 0
        for i in range(2, 200):  # each call costs something: the limit is reached
            reply = await ask(rt, msg(i, f"and OPS-{i}?", mention=True))
            if reply is None or reply.failed:
                break
            answered += 1
        else:
            pytest.fail(f"{answered} replies answered, none refused: nothing was counted")
        assert await used_today(rt) <= LIMIT


async def test_a_stream_in_big_chunks_without_reported_usage_counts_its_text(
    tmp_path: Path,
) -> None:
    answer = " ".join(f"word{i}" for i in range(400))  # hundreds of tokens in one chunk
    async with FakeOpenAI(responder=default_responder) as fake, runtime(
            tmp_path, fake, DAILY_TOKENS_PER_SERVER=str(LIMIT)) as rt:
        fake.report_usage = False
        fake.push(Text(answer, chunks=[answer]))
        with rt.features.quota.paying(KEY, "reply", "alice"):
            got = [piece async for piece in rt.llm.stream(
                [{"role": "user", "content": "say a lot"}], max_tokens=1000, purpose="reply")]
        assert "".join(got) == answer
        assert await used_today(rt) >= rt.llm.tokenizer.count(answer)  # not one per chunk
