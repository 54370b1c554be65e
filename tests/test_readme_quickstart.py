"""The README's quick start, run as written on the loopback fakes: each platform's commands
are read out of README.md (its code blocks and the commands and ``.env`` lines its steps
name) and run in a fresh folder, with ``.venv`` the venv under test, the values the README
tells people to fill in pointed at the fakes, and the platform libraries redirected by
``tests/fakes/site/sitecustomize.py`` — nothing else. Each run must connect and answer a
message. Docker compose can only be read (no Docker daemon here): its commands must name a
file, a service and a command that exist."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import yaml

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.fakes.slack_api import FakeSlack
from tests.harness.discord import W
from tests.harness.process import BotProcess
from tests.harness.slack import event_body, mention

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SITE = ROOT / "tests" / "fakes" / "site"
VENV = Path(sys.executable).parent.parent
OLLAMA = "http://localhost:11434/v1"  # the README's example endpoint, swapped for the fake
_BLOCK = re.compile(r"^ *```(\w*)\n(.*?)^ *```", re.S | re.M)  # in a list item too
_SETTING = re.compile(r"`([A-Z][A-Z0-9_]+)=([^`]*)`")
_COMMAND = re.compile(r"`((?:\.venv/bin/)?gistbot(?: [^`]*)?)`")


def section(title: str) -> str:
    """The text of the README's ``### title`` section."""
    m = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^##)", README, re.S | re.M)
    assert m, f"README has no '### {title}' section"
    return m.group(1)


def blocks(text: str, lang: str) -> list[str]:
    return [textwrap.dedent(body) for found, body in _BLOCK.findall(text) if found == lang]


def settings_named(text: str) -> dict[str, str]:
    """The ``NAME=value`` settings a section tells people to put in ``.env``."""
    return dict(_SETTING.findall(text))


def commands_named(text: str) -> list[str]:
    return _COMMAND.findall(text)


def model_lines() -> dict[str, str]:
    """The console section's model settings (the ``printf`` line), at the fake."""
    [script] = blocks(section("Console"), "bash")
    m = re.search(r"printf '([^']*)' > \.env", script)
    assert m, script
    pairs = m.group(1).replace(OLLAMA, "{llm}").split("\\n")
    return dict(p.split("=", 1) for p in pairs if p)


def fresh_folder(tmp_path: Path) -> Path:
    """A folder like a fresh clone after the install step: ``.venv`` is the venv under test."""
    work = tmp_path / "clone"
    work.mkdir()
    (work / ".venv").symlink_to(VENV)
    assert (work / ".venv" / "bin" / "gistbot").exists(), "the venv has no gistbot script"
    return work


def environment(tmp_path: Path, **test: str) -> dict[str, str]:
    """A user's environment: a home, the venv's scripts on PATH (``gistbot …``), and the
    fakes' addresses for ``sitecustomize``; no gistbot setting."""
    passed = {k: v for k, v in os.environ.items() if k in ("TIKTOKEN_CACHE_DIR", "XDG_CACHE_HOME")}
    return {**passed, "HOME": str(tmp_path), "LANG": "C.UTF-8",
            "PATH": f"{VENV / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "PYTHONPATH": f"{SITE}:{ROOT}", **test}


def write_env(work: Path, values: dict[str, str]) -> None:
    (work / ".env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))


@asynccontextmanager
async def started(command: str, work: Path, env: dict[str, str]) -> AsyncIterator[BotProcess]:
    """``command`` (as the README writes it) running in ``work``; killed if still running."""
    proc = await asyncio.create_subprocess_exec(
        *shlex.split(command), cwd=work, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    bot = BotProcess(proc)
    try:
        yield bot
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        await asyncio.gather(bot._reader, return_exceptions=True)
    assert "Traceback" not in bot.log, bot.log


async def test_console_quick_start_as_written(tmp_path: Path) -> None:
    [script] = blocks(section("Console"), "bash")
    assert OLLAMA in script and ".venv/bin/gistbot console" in script
    work = fresh_folder(tmp_path)
    model = model_lines()["MODEL_NAME"]
    async with FakeOpenAI(responder=default_responder, models=(model,), strict=False) as llm:
        proc = await asyncio.create_subprocess_exec(
            "bash", "-e", "-c", script.replace(OLLAMA, llm.base_url), cwd=work,
            env=environment(tmp_path), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(b"hello from the readme\n"), 120)
    text = out.decode() + err.decode()
    assert proc.returncode == 0, text
    assert "All checks passed" in text, text  # doctor reached the model
    assert re.search(r"^You said: .*hello from the readme$", text, re.M), text  # the answer
    assert {r.json["model"] for r in llm.chat_requests if r.json} == {model}
    assert (work / "gistbot.db").exists()


async def test_discord_quick_start_as_written(tmp_path: Path) -> None:
    text = section("Discord")
    named = settings_named(text)
    commands = commands_named(text)
    assert "DISCORD_TOKEN" in named and ".venv/bin/gistbot run" in commands, (named, commands)
    work = fresh_folder(tmp_path)
    # step 4: the invite command prints the URL the README shows
    [invite] = [c for c in commands if "discord-invite" in c]
    [url] = blocks(text, "text")
    app_id = str(W.app_id)
    done = await asyncio.create_subprocess_exec(
        *shlex.split(invite.replace("<APPLICATION_ID>", app_id)), cwd=work,
        env=environment(tmp_path), stdout=asyncio.subprocess.PIPE)
    printed, _ = await done.communicate()
    assert done.returncode == 0 and url.strip().replace("<APPLICATION_ID>", app_id) in (
        printed.decode()), printed
    async with FakeDiscord() as fake, FakeOpenAI(responder=default_responder,
                                                 models=(model_lines()["MODEL_NAME"],),
                                                 strict=False) as llm:
        settings = {"DISCORD_TOKEN": "fake-discord-token"}  # step 2
        settings |= {k: v.format(llm=llm.base_url) for k, v in model_lines().items()}
        write_env(work, settings)
        env = environment(tmp_path, GISTBOT_TEST_DISCORD_API=fake.api_base,
                          GISTBOT_TEST_DISCORD_GATEWAY=str(fake.gateway_url))
        async with started(".venv/bin/gistbot run", work, env):  # step 5
            await fake.wait_for(lambda f: f.connected, within=60)
            await fake.send_message(W.general, W.bob, f"<@{W.bot_id}> hello from the readme",
                                    mentions=[W.bot_user])
            answers = await fake.wait_for(lambda f: [
                r for r in f.sent_to(W.general)
                if "hello from the readme" in str((r.json or {}).get("content"))], within=60)
    assert "You said:" in answers[0].json["content"]


async def test_slack_quick_start_as_written(tmp_path: Path) -> None:
    text = section("Slack")
    named = settings_named(text)
    assert {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"} <= named.keys(), named
    assert ".venv/bin/gistbot run" in commands_named(text)
    assert (ROOT / "slack_manifest.yaml").exists()  # step 1 pastes it
    work = fresh_folder(tmp_path)
    async with FakeSlack() as fake, FakeOpenAI(responder=default_responder,
                                               models=(model_lines()["MODEL_NAME"],),
                                               strict=False) as llm:
        fake.add_user("U1", "Alice")
        tokens = {"SLACK_BOT_TOKEN": fake.bot_token, "SLACK_APP_TOKEN": fake.app_token}
        assert all(named[k].split("…")[0] == v[:5] for k, v in tokens.items()), named
        write_env(work, tokens | {k: v.format(llm=llm.base_url)
                                  for k, v in model_lines().items()})
        env = environment(tmp_path, GISTBOT_TEST_SLACK_API=fake.api_url)
        async with started(".venv/bin/gistbot run", work, env):  # step 4
            body = event_body(mention("<@UBOT> hello from the readme", ts="1700000000.000100"),
                              event_id="EvReadme")
            await fake.socket_send({"envelope_id": "env-readme", "type": "events_api",
                                    "accepts_response_payload": False, "payload": body},
                                   within=60)
            await fake.wait_socket_ack("env-readme", within=30)

            def answered() -> bool:
                return any("hello from the readme" in str(c.params.get("text"))
                           for c in fake.calls_to("chat.postMessage")
                           + fake.calls_to("chat.update"))

            await fake.wait_until(answered, within=60)


def test_docker_compose_quick_start_names_what_exists() -> None:
    [script] = blocks(section("Docker compose"), "bash")
    lines = [line.split("#")[0].strip() for line in script.splitlines()]
    assert "cp .env.example .env" in lines and (ROOT / ".env.example").exists()
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    for line in lines:
        if line.startswith("docker compose logs"):
            assert line.split()[-1] in services, line
    bot = services["gistbot"]
    env_files = bot.get("env_file", [])
    assert ".env" in (env_files if isinstance(env_files, list) else [env_files]) or any(
        isinstance(e, dict) and e.get("path") == ".env" for e in env_files), bot
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r'^CMD \["gistbot", "run"\]', dockerfile, re.M) or "run" in str(
        bot.get("command", "")), "the image does not run `gistbot run`"
