"""A key copied from documentation (``sk-…``, ``<your key>``, ``xoxb-xxxx``) is a
configuration error that names the variable, before any request: never a request that fails
with an encoding error, and never a 401 from the provider."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.cli import main
from bot.errors import ConfigError
from bot.settings import load_settings, looks_like_placeholder
from tests.fakes.openai_server import FakeOpenAI

PLACEHOLDERS = [
    "sk-…", "sk-...", "sk-…abc", "sk-proj-…", "sk-xxxxxxxx", "sk-xxx", "xxx",
    "<your key>", "sk-<key>", "your-openai-key", "YOUR_API_KEY", "Your key here",
    "changeme", "sk-proj-ключ", "sk-abc\u00a0def", "xoxb-xxxxxxxxxx-xxxx",
]
REAL_LOOKING = [
    "sk-proj-Ab3xxxK9qLmN0pQrStUvWxYz0123456789abcdEFGH",  # "xxx" inside a random word
    "sk-1234567890abcdefghijklmnopqrstuvwxyz",
    "MTIzNDU2Nzg5MDEyMzQ1Njc4.GAbCdE.fghijklmnopqrstuvwxyz0123456789",
    "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx",
]


@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_placeholders_are_recognised(value: str) -> None:
    assert looks_like_placeholder(value)


@pytest.mark.parametrize("value", REAL_LOOKING)
def test_real_looking_keys_are_not(value: str) -> None:
    assert not looks_like_placeholder(value)


@pytest.mark.parametrize(
    "variable", ["OPENAI_API_KEY", "DISCORD_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN",
                 "SLACK_SIGNING_SECRET", "ADMIN_TOKEN"],
)
def test_every_key_and_token_is_checked(variable: str) -> None:
    with pytest.raises(ConfigError, match=f"{variable}: looks like a placeholder"):
        load_settings({variable: "paste-your-token-here…"})


async def test_doctor_with_an_ellipsis_key_in_env_exits_2_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeOpenAI() as fake:
        env = tmp_path / ".env"
        env.write_text(f"OPENAI_API_KEY=sk-…\nOPENAI_BASE_URL={fake.base_url}\n"
                       f"DATABASE_URL=sqlite:///{tmp_path}/g.db\n", encoding="utf-8")
        status = await asyncio.to_thread(main, ["--env-file", str(env), "doctor"])
        assert fake.requests == []
    captured = capsys.readouterr()
    assert status == 2
    assert "OPENAI_API_KEY: looks like a placeholder" in captured.err
    assert "codec" not in captured.err + captured.out
    assert not (tmp_path / "g.db").exists()
