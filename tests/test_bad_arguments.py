"""Command arguments gistbot can't read, as people send them: real slack-bolt against the
loopback Slack, a real discord.py client against the loopback Discord, and the console. Each
gets a usage sentence, only for the caller — never silence, never "Sorry, something went
wrong", never an ERROR in the log — and nothing is scheduled."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from adapters.console_adapter import ConsoleChat, console_key
from bot.app import Runtime
from bot.settings import load_settings
from tests.fakes.discord_server import EVERYONE_PERMISSIONS, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import GENERAL, W, followup_to, make_settings, running
from tests.harness.slack import KEY, Harness

EPHEMERAL = 64  # Discord's message flag: only the caller sees it
# (command, text, what the answer says); each was an unanswered or failed command before
DEFECTS = [
    pytest.param("catchup", "9999999999999h", "more than 100 years", id="huge-length"),
    pytest.param("catchup", "0001-01-01T00:00+14:00", "from 1970 on", id="year-0"),
    pytest.param("catchup", "9" * 400 + "h", "too long", id="overflowing-digits"),
    pytest.param("catchup", "9" * 5000 + "h", "too long", id="past-int-digit-limit"),
    pytest.param("catchup", "yesterday Mars/Phobos", "I don't know the time zone 'Mars/Phobos'",
                 id="unknown-zone"),
    pytest.param("digest", "daily ９:００", "digits 0-9", id="full-width-digest-time"),
]


def no_errors(caplog: pytest.LogCaptureFixture) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]


@pytest.mark.parametrize(("command", "text", "says"), DEFECTS)
async def test_slack_answers_unreadable_arguments_with_the_usage(
    h: Harness, caplog: pytest.LogCaptureFixture, command: str, text: str, says: str
) -> None:
    caplog.set_level(logging.INFO)
    status, _ = await h.command(f"/{command}", user="U2", text=f"{text} public")
    assert status == 200
    [call] = await h.fake.wait_for(f"response_url:{command}")
    answer = call.params["text"]
    assert says in answer and "Sorry" not in answer
    assert call.params["response_type"] == "ephemeral"
    assert await h.rt.storage.digests.digest_schedule(KEY) is None
    await h.settle()
    no_errors(caplog)


@pytest.mark.parametrize(("command", "text", "says"), DEFECTS)
async def test_discord_answers_unreadable_arguments_with_the_usage(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI,
    caplog: pytest.LogCaptureFixture, command: str, text: str, says: str
) -> None:
    caplog.set_level(logging.INFO)
    options: dict[str, object] = (
        {"since": text, "public": True} if command == "catchup" else {"schedule": text})
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _watch):
        inter = await discord_fake.interaction(command, invoker=W.bob, channel_id=W.general,
                                               permissions=EVERYONE_PERMISSIONS | 1 << 4,
                                               options=options)
        answer = await followup_to(discord_fake, inter)
        assert says in answer.json["content"] and "Sorry" not in answer.json["content"]
        assert answer.json["flags"] & EPHEMERAL
        assert await rt.storage.digests.digest_schedule(GENERAL) is None
    no_errors(caplog)


@pytest.mark.parametrize(("command", "text", "says"), DEFECTS)
async def test_the_console_answers_unreadable_arguments_with_the_usage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, command: str, text: str, says: str
) -> None:
    caplog.set_level(logging.INFO)
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/c.db"}, env_file=None)
    async with Runtime.open(settings) as rt:
        out = io.StringIO()
        chat = ConsoleChat(rt.features, channel="ops", user="erin", stdin=io.StringIO(),
                           stdout=out)
        await chat.handle("deploy v2.4.0 went out at noon")
        before = len(out.getvalue())
        assert await chat.handle(f"/{command} {text}")
        answer = out.getvalue()[before:]
        assert says in answer and "Sorry" not in answer
        assert await rt.storage.digests.digest_schedule(console_key("ops")) is None
    no_errors(caplog)


async def test_discord_answers_options_discord_py_cannot_read_with_the_usage(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI,
    caplog: pytest.LogCaptureFixture
) -> None:
    """A required option missing (a stale registration, a crafted payload) fails in
    discord.py before gistbot's callback: the caller still gets the usage, privately."""
    caplog.set_level(logging.INFO)
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _watch):
        inter = await discord_fake.interaction("remember", invoker=W.bob, channel_id=W.general,
                                               options={})
        path = f"/interactions/{inter['id']}/{inter['token']}/callback"
        [answer] = await discord_fake.wait_for(lambda f: f.calls("POST", path))
        assert answer.json["data"]["flags"] & EPHEMERAL
        assert "Usage: /remember <text>" in answer.json["data"]["content"]
        assert await rt.store.list_facts(GENERAL, limit=10) == []
    no_errors(caplog)
