"""``OPENAI_BASE_URL`` without ``/v1`` (``http://localhost:11434`` for Ollama) gets 404 for
every call. ``gistbot doctor`` and the error line the console and the bot log say to add
``/v1``, naming the value to set; the chat gets a sentence naming the setting. The real
``openai`` SDK against the loopback fake, which serves the API under ``/v1`` only."""

from __future__ import annotations

import asyncio
import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bot.cli import main
from bot.errors import EndpointNotFound
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.harness.console import batch, console_env


def without_v1(fake: FakeOpenAI) -> str:
    base = fake.base_url
    assert base.endswith("/v1")
    return base.removesuffix("/v1")


async def test_doctor_says_to_add_v1(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake:
        env = tmp_path / "bot.env"
        env.write_text(f"OPENAI_BASE_URL={without_v1(fake)}\nMODEL_NAME=gpt-test\n"
                       f"DATABASE_URL=sqlite:///{tmp_path}/bot.db\nLLM_MAX_RETRIES=0\n")
        out = io.StringIO()

        def doctor() -> int:
            with redirect_stdout(out):
                return main(["doctor", "--env-file", str(env)])

        assert await asyncio.to_thread(doctor) == 1
    [llm] = [line for line in out.getvalue().splitlines() if line.strip().startswith("llm")]
    assert "FAILED" in llm and "404" in llm
    assert f"OPENAI_BASE_URL={without_v1(fake)}/v1" in llm, llm


@pytest.mark.slow
async def test_the_console_names_the_setting_and_its_fix(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake:
        env = console_env(tmp_path, OPENAI_BASE_URL=without_v1(fake), MODEL_NAME="gpt-test",
                          LLM_MAX_RETRIES="0")
        questions = tmp_path / "q.txt"
        questions.write_text("hello?\n", encoding="utf-8")
        done = await asyncio.to_thread(batch, tmp_path, "console", stdin=questions, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == EndpointNotFound.user_message
    [line] = done.stderr.splitlines()
    assert f"add it: OPENAI_BASE_URL={without_v1(fake)}/v1" in line, line
    assert "Traceback" not in done.stderr


async def test_a_base_url_with_its_version_is_not_told_to_add_v1(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake:
        env = tmp_path / "bot.env"
        env.write_text(f"OPENAI_BASE_URL={without_v1(fake)}/api/v2\nMODEL_NAME=gpt-test\n"
                       f"DATABASE_URL=sqlite:///{tmp_path}/bot.db\nLLM_MAX_RETRIES=0\n")
        out = io.StringIO()

        def doctor() -> int:
            with redirect_stdout(out):
                return main(["doctor", "--env-file", str(env)])

        assert await asyncio.to_thread(doctor) == 1
    assert "404" in out.getvalue() and "/v1" not in out.getvalue().split("Configuration")[0]
