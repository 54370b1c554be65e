"""Discord and Slack failing at start or after it: one line naming the cause and the fix
(no traceback, no discord.py voice warnings), and retries once the bot has connected."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import discord
import pytest

from adapters.discord import launch, run_discord
from adapters.slack.launch import serve as serve_slack
from bot.app import Runtime
from bot.cli import main
from bot.errors import PlatformUnreachable
from bot.settings import load_settings
from tests.fakes.discord_server import FakeDiscord, Request
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.console import closed_port
from tests.harness.discord import TOKEN, make_settings
from tests.harness.slack import environ, web_client


@pytest.fixture
def root_logging() -> Iterator[None]:
    """``main`` sets up logging for a process; give the next test back what it had."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_discord_is_named_as_the_default_host() -> None:
    assert launch.api_host() == "discord.com"


def test_discord_unreachable_at_start_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    root_logging: None,
) -> None:
    port = closed_port()
    monkeypatch.setattr(discord.http.Route, "BASE", f"http://127.0.0.1:{port}/api/v10")
    env = tmp_path / "discord.env"
    env.write_text(f"DISCORD_TOKEN={TOKEN}\nOPENAI_BASE_URL=http://127.0.0.1:{port}/v1\n"
                   f"DATABASE_URL=sqlite:///{tmp_path}/gistbot.db\nLOG_LEVEL=WARNING\n")
    assert main(["--env-file", str(env), "run"]) == 1
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith(f"gistbot: cannot reach 127.0.0.1:{port} (ClientConnector")
    assert "check the network" in line
    assert "voice" not in err and "Traceback" not in err


async def test_discord_outage_after_login_is_retried_not_fatal(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    # Logged in, then Discord's gateway endpoint answers 503 once (an outage): discord.py
    # gives up with GatewayNotFound; the adapter connects again after a backoff.
    monkeypatch.setattr(launch, "RETRY_BASE", 0.05)
    answer = discord_fake._answer
    outages: list[Request] = []

    async def flaky(r: Request) -> tuple[int, Any]:
        if r.path == "/gateway/bot" and not outages:
            outages.append(r)
            return 503, {"message": "upstream connect error", "code": 0}
        return await answer(r)

    monkeypatch.setattr(discord_fake, "_answer", flaky)
    caplog.set_level(logging.WARNING, logger="adapters.discord.launch")
    async with Runtime.open(make_settings(tmp_path, discord_llm)) as rt:
        task = asyncio.create_task(run_discord(rt.features, rt.settings))
        try:
            await discord_fake.wait_for(lambda f: f.identifies, within=30)
            assert outages and not task.done()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    (warning,) = [r.getMessage() for r in caplog.records
                  if r.name == "adapters.discord.launch"]
    assert "lost the connection to Discord (GatewayNotFound" in warning
    assert "reconnecting in 0s" in warning


async def test_slack_unreachable_at_start_is_one_line(tmp_path: Path) -> None:
    port = closed_port()
    settings = load_settings(environ(tmp_path), env_file=None)
    async with Runtime.open(settings) as rt:
        client = web_client(settings, f"http://127.0.0.1:{port}/api/")
        with pytest.raises(PlatformUnreachable) as info:
            await serve_slack(rt.features, settings, client=client)
    message = str(info.value)
    assert message.startswith(f"cannot reach 127.0.0.1:{port} (")
    assert "\n" not in message and "check the network" in message


async def test_discord_bad_token_at_start_is_one_line(
    tmp_path: Path, discord_fake: FakeDiscord, capsys: pytest.CaptureFixture[str],
    root_logging: None,
) -> None:
    discord_fake.token = "another-token"  # Discord answers 401 to ours
    env = tmp_path / "discord.env"
    env.write_text(f"DISCORD_TOKEN={TOKEN}\nOPENAI_BASE_URL=http://127.0.0.1:{closed_port()}/v1\n"
                   f"DATABASE_URL=sqlite:///{tmp_path}/gistbot.db\nLOG_LEVEL=WARNING\n")
    # main() runs its own event loop: in a thread, while this loop serves the fake.
    assert await asyncio.to_thread(main, ["--env-file", str(env), "run"]) == 2
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith("gistbot: DISCORD_TOKEN was rejected by Discord: copy a fresh token")
