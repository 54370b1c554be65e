"""Batch mode's input syntax (``gistbot console < FILE``): one message per line; the lines
between two lines of three double quotes are one message, blank lines kept, never read as
a command; blank lines outside are skipped and said so on stderr, with the line numbers and
how to send several lines. The real program, the offline model, memory read back with
``gistbot export``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.console import batch, console_env

pytestmark = pytest.mark.slow

FILE = '''first question

"""
/summary is not a command here
  indented line

last line of the block
"""
second question
'''


def stored(tmp_path: Path, env: dict[str, str]) -> list[str]:
    out = batch(tmp_path, "export", "--channel", "general", stdin="/dev/null", env=env)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    return [r["text"] for r in rows if r["type"] == "turn" and r["role"] == "user"]


def test_a_fenced_block_is_one_message_and_a_skipped_blank_line_is_said(
    tmp_path: Path,
) -> None:
    messages = tmp_path / "messages.txt"
    messages.write_text(FILE, encoding="utf-8")
    env = console_env(tmp_path)
    done = batch(tmp_path, "console", "--json", stdin=messages, env=env)
    assert done.returncode == 0, done.stderr
    inputs = [json.loads(line)["input"] for line in done.stdout.splitlines()]
    block = "/summary is not a command here\n  indented line\n\nlast line of the block"
    assert inputs == ["first question", block, "second question"]
    assert stored(tmp_path, env) == inputs  # the block was a message, not /summary
    [notice] = done.stderr.splitlines()
    assert notice.startswith("gistbot: skipped 1 blank line (line 2): ")
    assert '"""' in notice


def test_an_unclosed_block_is_still_sent_and_said(tmp_path: Path) -> None:
    messages = tmp_path / "messages.txt"
    messages.write_text('hello\n"""\nline one\nline two\n', encoding="utf-8")
    env = console_env(tmp_path)
    done = batch(tmp_path, "console", stdin=messages, env=env)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2
    assert stored(tmp_path, env) == ["hello", "line one\nline two"]
    assert done.stderr == ('gistbot: the """ of line 2 was never closed; what followed it was '
                           "sent as one message\n")
