"""``run_slack``: Socket Mode and HTTP mode end to end against the fake Slack, a rejected
bot token, and the app manifest declaring what the adapter uses.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path

import aiohttp
import pytest

from adapters.slack import run_slack
from bot.app import Runtime
from bot.errors import ConfigError
from bot.settings import load_settings
from tests.fakes.slack_api import FakeSlack
from tests.harness.slack import (
    KEY,
    TS,
    FakeLLM,
    directory,
    environ,
    event_body,
    mention,
    sign,
    web_client,
)


async def test_socket_mode_round_trip(tmp_path: Path, llm: FakeLLM) -> None:
    async with FakeSlack() as fake:
        directory(fake)
        env = environ(tmp_path, SLACK_APP_TOKEN=fake.app_token)
        del env["SLACK_SIGNING_SECRET"]
        settings = load_settings(environ=env, env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            stop = asyncio.Event()
            client = web_client(settings, fake.api_url)
            serving = run_slack(rt.features, rt.settings, client=client, stop=stop)
            task = asyncio.create_task(serving)
            try:
                await fake.socket_send({
                    "envelope_id": "env-1", "type": "events_api",
                    "accepts_response_payload": False, "retry_attempt": 0, "retry_reason": "",
                    "payload": event_body(mention()),
                })  # fmt: skip
                ack = await fake.wait_socket_ack("env-1")
                assert ack == {"envelope_id": "env-1"}
                update = (await fake.wait_for("chat.update"))[0].params
                assert update["text"] == "Hello from the model."
                assert fake.calls_to("chat.postMessage")[0].params["thread_ts"] == TS
                [opened] = fake.calls_to("apps.connections.open")
                assert opened.token == fake.app_token
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)
            assert [t.role for t in await rt.store.turns(KEY)] == ["user", "assistant"]
            assert rt.service.identity("slack")[0] == "UBOT"


async def test_run_slack_http_mode_serves_signed_events(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adapters.slack.launch")
    async with FakeSlack() as fake, aiohttp.ClientSession() as http:
        directory(fake)
        settings = load_settings(environ=environ(tmp_path, PORT="0"), env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            stop = asyncio.Event()
            client = web_client(settings, fake.api_url)
            serving = run_slack(rt.features, rt.settings, client=client, stop=stop)
            task = asyncio.create_task(serving)
            try:
                url = await listening_url(caplog, task)
                assert url.startswith("http://127.0.0.1:") and url.endswith("/slack/events")
                body = json.dumps(event_body(mention()))
                plain = {"Content-Type": "application/json"}
                async with http.post(url, data=body, headers=plain) as r:
                    assert r.status == 401  # unsigned
                async with http.post(url, data=body, headers=plain | sign(body)) as r:
                    assert r.status == 200
                await fake.wait_for("chat.update")
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)
            assert [t.role for t in await rt.store.turns(KEY)] == ["user", "assistant"]


async def listening_url(caplog: pytest.LogCaptureFixture, task: asyncio.Task[None]) -> str:
    """The URL run_slack logs once it listens (port 0 picks it), within five seconds."""
    async with asyncio.timeout(5):
        while True:
            for record in caplog.records:
                if m := re.search(r"listening on (\S+)", record.getMessage()):
                    return m.group(1)
            assert not task.done(), task
            await asyncio.sleep(0.01)


async def test_rejected_bot_token_is_a_config_error(tmp_path: Path, llm: FakeLLM) -> None:
    async with FakeSlack(bot_token="xoxb-the-real-one") as fake:
        settings = load_settings(environ=environ(tmp_path), env_file=None)
        async with Runtime.open(settings, llm=llm) as rt:
            client = web_client(settings, fake.api_url)
            with pytest.raises(ConfigError, match="invalid_auth"):
                serving = run_slack(rt.features, rt.settings, client=client)
                await asyncio.wait_for(serving, 10)


def test_manifest_declares_what_the_adapter_uses() -> None:
    manifest = (Path(__file__).parent.parent / "slack_manifest.yaml").read_text()
    lines = {line.split("#")[0].strip() for line in manifest.splitlines()}
    for needed in (
        "- command: /summary",
        "- command: /reset",
        "- command: /remember",
        "- command: /memory",
        "- command: /forget",
        "socket_mode_enabled: true",
        "- app_mention",
        "- message.channels",
        "- message.groups",
        "- message.im",
        "- message.mpim",
        "- chat:write",
        "- commands",
        "- users:read",
        "- files:read",
        "- app_mentions:read",
        "- channels:history",
        "- groups:history",
        "- im:history",
        "- mpim:history",
        "- channels:read",
        "- groups:read",
        "- im:read",
        "- assistant:write",
        "- assistant_thread_started",
        "- assistant_thread_context_changed",
        "assistant_view:",
        "- mpim:read",
        "messages_tab_enabled: true",
    ):
        assert needed in lines, needed
