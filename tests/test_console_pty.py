"""The console as a person meets it: the real ``gistbot console`` in a pseudo-terminal
(line editing, history across runs, Ctrl-C as in shells, no log line in the chat, the
spinner never overwritten, one-line errors) and with a file or ``/dev/null`` on stdin
(batch mode: bare answers or JSON Lines, 130 on SIGINT)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from adapters.console_adapter import CANCELLED, QUIT_HINT
from tests.fakes.openai_server import (
    FakeOpenAI,
    Hang,
    Text,
    context_length_error,
    default_responder,
)
from tests.harness.console import (
    ROOT,
    USER,
    Terminal,
    batch,
    closed_port,
    console_env,
    plain,
)

pytestmark = pytest.mark.slow

LOG_LINE = re.compile(r"\b(DEBUG|INFO|WARNING|ERROR)\b \S+: ")


async def poll(done: Callable[[], bool], within: float) -> None:
    """Wait until ``done()`` holds, checking every 50 ms, failing after ``within`` s."""
    deadline = time.monotonic() + within
    while not done():
        assert time.monotonic() < deadline, "not within the deadline"
        await asyncio.sleep(0.05)


def stored_texts(tmp_path: Path, env: dict[str, str]) -> list[str]:
    """The user turns stored in the console channel ``general``, via ``gistbot export``."""
    out = batch(tmp_path, "export", "--channel", "general", stdin="/dev/null", env=env)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    return [r["text"] for r in rows if r["type"] == "turn" and r["role"] == "user"]


Opens = Callable[..., Terminal]


@pytest.fixture
def terminal() -> Iterator[Opens]:
    """Opens terminals (``Terminal``'s arguments); each one's process is ended and waited at
    teardown, whatever the test did."""
    opened: list[Terminal] = []

    def open_terminal(*args: Any, **kwargs: Any) -> Terminal:
        opened.append(Terminal(*args, **kwargs))
        return opened[-1]

    yield open_terminal
    for term in opened:
        term.close()


async def test_left_arrow_edits_the_line_and_up_arrow_recalls_it(
    tmp_path: Path, terminal: Opens
) -> None:
    env = console_env(tmp_path)
    term = terminal(tmp_path, "console", env=env)
    await term.prompt()
    term.type("hello world")
    term.type("\x1b[D" * 3)
    term.type("X\r")
    await term.expect("gistbot> ")
    await term.prompt()
    term.type("\x1b[A")  # ↑: the previous line, to send again
    term.type("\r")
    await term.expect("gistbot> ")
    assert await term.quit() == 0
    assert stored_texts(tmp_path, env) == ["hello woXrld", "hello woXrld"]
    assert "^[[" not in plain(term.transcript)


async def test_offline_model_chat_shows_no_log_line(
    tmp_path: Path, terminal: Opens
) -> None:
    term = terminal(tmp_path, "console", env=console_env(tmp_path, LOG_LEVEL="INFO"))
    for text in ("hello", "what do you remember?", "/summary"):
        await term.prompt()
        term.type(text + "\r")
        await term.expect("gistbot> " if not text.startswith("/") else "Remembering")
    assert await term.quit() == 0
    shown = plain(term.transcript)
    assert "offline model" in shown  # the banner says it once, not a log line
    assert not LOG_LINE.search(shown), shown
    assert "Remembering 4 messages" in shown


async def test_real_sdk_chat_with_compaction_shows_no_log_line(
    tmp_path: Path, terminal: Opens
) -> None:
    async with FakeOpenAI(responder=default_responder) as fake:
        env = console_env(tmp_path, OPENAI_BASE_URL=fake.base_url, MODEL_NAME="gpt-test",
                          LOG_LEVEL="INFO", MAX_HISTORY_MESSAGES="4", KEEP_RECENT_MESSAGES="2")
        term = terminal(tmp_path, "console", env=env)
        for i in range(6):
            await term.say(f"note {i}: ticket TCK-{i} belongs to Mina")
        assert await term.quit() == 0
        assert len(fake.chat_requests) > 6  # the replies, and summaries in the background
    shown = plain(term.transcript)
    assert shown.count("gistbot> You said:") == 6
    assert not LOG_LINE.search(shown), shown
    assert "httpx" not in shown and "HTTP Request" not in shown


async def test_a_warning_while_thinking_is_printed_above_the_spinner(
    tmp_path: Path, terminal: Opens
) -> None:
    # The first answer is "prompt too long": the service logs a WARNING while the spinner
    # turns, compacts and asks again. The record must start on a cleared line, and the
    # spinner must never have text written after it on its line.
    async with FakeOpenAI(responder=default_responder, latency=lambda _: 0.3) as fake:
        fake.push(context_length_error(), Text("second try worked"))
        env = console_env(tmp_path, OPENAI_BASE_URL=fake.base_url, MODEL_NAME="gpt-test",
                          LLM_MAX_RETRIES="0")
        term = terminal(tmp_path, "console", env=env)
        await term.say("a message that is too long, the model says")
        await term.expect("second try worked")
        assert await term.quit() == 0
    out = term.transcript
    assert "thinking…" in out
    assert "context length exceeded" in out
    assert not re.search(r"thinking…[^\r\x1b]", out), out
    line_start = out.index("WARNING bot.conversation.reply_job: context length exceeded")
    assert "\n" not in out[out.rfind("\x1b[K", 0, line_start) : line_start]
    assert "thinking…" not in out[line_start : out.index("\n", line_start)]


async def test_unreachable_model_is_one_line_naming_the_fix(
    tmp_path: Path, terminal: Opens
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    env = console_env(tmp_path, OPENAI_BASE_URL=url, LLM_MAX_RETRIES="0")
    term = terminal(tmp_path, "console", env=env)
    await term.say("is anyone there?")
    assert await term.quit() == 0
    shown = plain(term.transcript)
    assert "The language model is unavailable" in shown
    (error,) = [line for line in shown.splitlines() if "ERROR" in line]
    assert f"cannot reach the model endpoint {url}" in error
    assert "OPENAI_BASE_URL" in error and "gistbot doctor" in error
    assert "Traceback" not in shown


async def test_unreachable_model_traceback_at_debug(
    tmp_path: Path, terminal: Opens
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    env = console_env(tmp_path, OPENAI_BASE_URL=url, LLM_MAX_RETRIES="0", LOG_LEVEL="DEBUG")
    term = terminal(tmp_path, "console", env=env)
    await term.say("is anyone there?")
    assert await term.quit() == 0
    shown = plain(term.transcript)
    assert "Traceback" in shown and "cannot reach the model endpoint" in shown


def test_batch_mode_from_a_file(tmp_path: Path) -> None:
    messages = tmp_path / "messages.txt"
    messages.write_text("first question\n\nsecond question\n/summary\n", encoding="utf-8")
    env = console_env(tmp_path)
    done = batch(tmp_path, "console", stdin=messages, env=env)
    assert done.returncode == 0, done.stderr
    answers = done.stdout.splitlines()  # one line per answer, bare; newlines written \\n
    assert len(answers) == 3 and "gistbot> " not in done.stdout
    assert "Remembering 4 messages" in answers[2] and "\\n" in answers[2]
    assert "\x1b" not in done.stdout and "thinking" not in done.stdout
    assert done.stderr.startswith("gistbot: skipped 1 blank line (line 2)")
    assert stored_texts(tmp_path, env) == ["first question", "second question"]


def test_batch_mode_from_dev_null(tmp_path: Path) -> None:
    done = batch(tmp_path, "console", stdin="/dev/null", env=console_env(tmp_path))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_verbose_shows_info_lines(tmp_path: Path) -> None:
    messages = tmp_path / "one.txt"
    messages.write_text("".join(f"note {i}\n" for i in range(4)), encoding="utf-8")
    # A window of two messages: the offline summarizer compacts, which is logged at INFO.
    env = console_env(tmp_path, LOG_LEVEL="INFO", MAX_HISTORY_MESSAGES="2",
                      KEEP_RECENT_MESSAGES="1")
    quiet = batch(tmp_path, "console", stdin=messages, env=env)
    loud = batch(tmp_path, "console", "--verbose", stdin=messages, env=env)
    assert quiet.stderr == ""
    assert "INFO memory.compaction: compacted" in loud.stderr
    assert f"{USER}>" not in loud.stdout  # no prompt in batch mode


async def test_ctrl_c_clears_the_line_and_a_second_on_an_empty_line_quits(
    tmp_path: Path, terminal: Opens,
) -> None:
    env = console_env(tmp_path)
    term = terminal(tmp_path, "console", env=env)
    await term.prompt()
    term.type("half a thought")
    term.type("\x03")  # Ctrl-C: the line is dropped, a fresh prompt
    await term.prompt()
    term.type("the real question\r")
    await term.expect("gistbot> ")
    await term.prompt()
    term.type("\x03")
    await term.expect(re.escape(QUIT_HINT))
    term.type("\x03")
    await term.child.expect(pexpect.EOF, async_=True)
    term.child.close()
    assert term.child.exitstatus == 0, term.transcript
    assert "Traceback" not in term.transcript
    assert stored_texts(tmp_path, env) == ["the real question"]


async def test_ctrl_c_during_a_request_cancels_it_and_the_chat_goes_on(
    tmp_path: Path, terminal: Opens
) -> None:
    async with FakeOpenAI(responder=default_responder) as fake:
        fake.push(Hang(60))
        env = console_env(tmp_path, OPENAI_BASE_URL=fake.base_url, MODEL_NAME="gpt-test",
                          LLM_MAX_RETRIES="0")
        term = terminal(tmp_path, "console", env=env)
        await term.prompt()
        term.type("a question the model thinks about forever\r")
        await term.expect("thinking…")
        await fake.wait_for(lambda f: bool(f.chat_requests))
        term.child.sendintr()  # the terminal turns Ctrl-C into SIGINT between prompts
        await term.expect(CANCELLED)
        await poll(lambda: bool(fake.disconnected), within=10)  # the client went away
        await term.say("and now?")
        await term.expect("You said")
        assert await term.quit() == 0
    assert "Traceback" not in term.transcript


async def test_history_is_kept_across_runs_in_xdg_state_home(
    tmp_path: Path, terminal: Opens
) -> None:
    env = console_env(tmp_path, XDG_STATE_HOME=str(tmp_path / "state"))
    first = terminal(tmp_path, "console", env=env)
    await first.say("remember this line")
    assert await first.quit() == 0
    second = terminal(tmp_path, "console", env=env)
    await second.prompt()
    second.type("\x1b[A\r")  # ↑ brings back the last run's line
    await second.expect("gistbot> ")
    assert await second.quit() == 0
    assert stored_texts(tmp_path, env) == ["remember this line"] * 2
    history = tmp_path / "state" / "gistbot" / "history"
    assert "remember this line" in history.read_text(encoding="utf-8")
    assert stat.S_IMODE(history.stat().st_mode) == 0o600  # what was said is private


def test_batch_mode_json_lines(tmp_path: Path) -> None:
    messages = tmp_path / "messages.txt"
    messages.write_text("first question\n/summary\n", encoding="utf-8")
    done = batch(tmp_path, "console", "--json", stdin=messages, env=console_env(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["input"] for r in rows] == ["first question", "/summary"]
    assert "\n" in rows[1]["output"] and "Remembering 2 messages" in rows[1]["output"]


async def test_sigint_in_batch_mode_exits_130_without_a_traceback(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "--env-file", os.devnull, "console",
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=tmp_path, env={**console_env(tmp_path), "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(b"hello\n")
    await proc.stdin.drain()
    await asyncio.wait_for(proc.stdout.readline(), 60)  # answering: the chat is running
    proc.send_signal(signal.SIGINT)
    status = await asyncio.wait_for(proc.wait(), 60)
    err = (await proc.stderr.read()).decode()
    assert status == 130, err
    assert "Traceback" not in err
