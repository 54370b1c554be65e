"""The console adapter end to end: a real ``gistbot console`` process, piped stdin, the real
openai SDK against the loopback OpenAI fake, and a real SQLite file across restarts."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI, default_responder, is_summary_request

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


async def console(tmp_path: Path, base_url: str, lines: list[str]) -> str:
    env_file = tmp_path / "test.env"
    env_file.write_text(
        f"OPENAI_BASE_URL={base_url}\nMODEL_NAME=gpt-test\nLLM_MAX_RETRIES=0\n"
        f"DATABASE_URL=sqlite:///{tmp_path}/console.db\nLOG_LEVEL=WARNING\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "TIKTOKEN_CACHE_DIR", "XDG_CACHE_HOME", "LANG")
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "--env-file",
        str(env_file),
        "console",
        "--channel",
        "e2e",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate("\n".join(lines).encode() + b"\n"), 90)
    assert proc.returncode == 0, err.decode()
    assert "Traceback" not in err.decode()
    return out.decode()


async def test_console_conversation_compacts_survives_restart_and_resets(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake:
        talk = [f"note {i}: ticket TCK-{7000 + i} is assigned to Mina" for i in range(30)]
        out = await console(tmp_path, fake.base_url, [*talk, "/summary", "/quit"])
        summaries = [r for r in fake.chat_requests if r.json and is_summary_request(r.json)]
        assert summaries, "30 turns must trigger compaction"
        answers = out.splitlines()  # one line per answer, bare
        assert len(answers) == 31 and "gistbot> " not in out
        assert all(a.startswith("You said:") for a in answers[:30])
        assert "Remembering 60 messages" in out

        again = await console(tmp_path, fake.base_url, ["/summary"])
        assert "Remembering 60 messages" in again  # memory survived the restart
        assert "TCK-7000" in again  # an early identifier, folded long ago, is still there

        cleared = await console(tmp_path, fake.base_url, ["/reset", "/summary"])
        assert "I forgot 60 messages" in cleared
        assert "Nothing to summarize yet" in cleared
