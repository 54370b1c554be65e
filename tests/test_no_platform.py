"""``gistbot run`` (and bare ``gistbot``, the image's command) with no platform token and no
terminal: a container or a service, where the console chat has no one to talk to. It must
stop at once with one line naming the variables to set and a non-zero status, not chat
with an empty stdin and exit 0 (under ``restart: unless-stopped``, a silent restart loop)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.harness.console import ROOT, batch, console_env

pytestmark = pytest.mark.slow


def image_command() -> list[str]:
    """The Dockerfile's CMD, as a list."""
    cmd = re.search(r"^CMD (\[.*\])$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert cmd, "the Dockerfile has no CMD in exec form"
    args: list[str] = json.loads(cmd[1])
    return args


@pytest.mark.parametrize("stdin", ["/dev/null", "file"])
def test_run_without_a_token_or_a_terminal_names_the_variables_and_exits_2(
    stdin: str, tmp_path: Path
) -> None:
    if stdin == "file":
        stdin = str(tmp_path / "questions.txt")
        Path(stdin).write_text("hello?\n", encoding="utf-8")
    program, *args = image_command()
    assert program == "gistbot"
    for command in (args, []):  # the image's `gistbot run`, and bare `gistbot`
        done = batch(tmp_path, *command, stdin=stdin, env=console_env(tmp_path))
        assert done.returncode == 2, command
        assert done.stdout == ""
        [line] = done.stderr.splitlines()
        for variable in ("DISCORD_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN",
                         "SLACK_SIGNING_SECRET"):
            assert variable in line
    assert not (tmp_path / "gistbot.db").exists()  # nothing was started


def test_the_console_still_answers_a_file_without_a_token(tmp_path: Path) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text("hello?\n", encoding="utf-8")
    done = batch(tmp_path, "console", stdin=questions, env=console_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1 and done.stderr == ""
