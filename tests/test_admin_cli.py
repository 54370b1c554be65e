"""``gistbot console`` (``run`` with no platform in a terminal) with ``ADMIN_PORT`` and
``ADMIN_TOKEN`` serves health, readiness, metrics and the inspector from the bot's own
process; ``export`` carries the summary history."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from bot.cli import main
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore
from tests.harness.admin import TOKEN

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_healthy(url: str, proc: asyncio.subprocess.Process) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(600):  # up to a minute on a loaded machine; no timing is asserted
            assert proc.returncode is None, "gistbot run exited early"
            try:
                async with http.get(f"{url}/healthz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("the admin server never answered")


@pytest.mark.slow
async def test_the_console_chat_serves_the_admin_server(tmp_path: Path) -> None:
    port = _free_port()
    env_file = tmp_path / "bot.env"
    env_file.write_text(f"DATABASE_URL=sqlite:///{tmp_path}/run.db\nADMIN_PORT={port}\n"
                        f"ADMIN_INSPECTOR=true\nADMIN_TOKEN={TOKEN}\nLOG_FORMAT=json\n")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "--env-file", str(env_file), "console", "--verbose",
        cwd=tmp_path, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        await _wait_healthy(url, proc)
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as http:
            async with http.get(f"{url}/readyz") as r:
                assert r.status == 200 and (await r.json())["status"] == "ready"
            async with http.get(f"{url}/metrics") as r:
                assert r.status == 200 and "gistbot_event_loop_lag_seconds" in await r.text()
            async with http.post(f"{url}/inspector/login", data={"token": TOKEN}) as r:
                assert r.status == 200 and "Channels" in await r.text()
    finally:
        out, err = await asyncio.wait_for(proc.communicate(b""), 60)
    assert proc.returncode == 0, err.decode()
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    assert any("admin server on" in line["message"] for line in lines)  # LOG_FORMAT=json
    assert TOKEN not in err.decode() and TOKEN not in out.decode()


def test_export_carries_the_summary_history(tmp_path: Path) -> None:
    key = ChannelKey("slack", "T1", "C1")

    async def seed() -> None:
        async with SqliteStore(tmp_path / "x.db") as store:
            for i in range(3):
                await store.record(NewTurn(key, f"m{i}", "user", "u", "U", f"t{i}", 1, 1.0))
            state = await store.state(key)
            await store.commit_summary(key, expected_version=state.version, text="model",
                                       folded_through=2, facts=(), now=5.0)
            state = await store.state(key)
            await store.edit_summary(key, expected_version=state.version, text="operator",
                                     now=6.0, author="10.0.0.9")

    asyncio.run(seed())
    env_file = tmp_path / "x.env"
    env_file.write_text(f"DATABASE_URL=sqlite:///{tmp_path}/x.db\n")
    out = tmp_path / "x.jsonl"
    assert main(["--env-file", str(env_file), "export", "--channel", "slack:T1:C1",
                 "-o", str(out)]) == 0
    header = json.loads(out.read_text().splitlines()[0])
    assert [(h["text"], h["source"], h["author"]) for h in header["summary_history"]] == [
        ("operator", "edit", "10.0.0.9"), ("model", "compaction", "")]
