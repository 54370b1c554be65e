"""The ``gistbot`` command's conventions: ``--version``, output into a closed pipe,
``channels``, unknown channels, a checked application id, and counts in good English."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.cli import main, version
from bot.memory_commands.feature import footer
from memory.models import ChannelKey, ChannelStats, NewTurn
from memory.stores.sqlite.store import SqliteStore
from tests.harness.console import console_env

SLACK = ChannelKey("slack", "T1", "C1")
CONSOLE = ChannelKey("console", "local", "general")


def env_file(tmp_path: Path) -> str:
    path = tmp_path / "cli.env"
    path.write_text(f"DATABASE_URL=sqlite:///{tmp_path}/cli.db\nLOG_LEVEL=WARNING\n")
    return str(path)


def seed(db: Path, counts: dict[ChannelKey, int], *, text: str = "hello") -> None:
    async def run() -> None:
        async with SqliteStore(db, synchronous="OFF") as store:
            for key, n in counts.items():
                for i in range(n):
                    await store.record(NewTurn(key, f"m{i}", "user", "u1", "Mina",
                                               f"{text} {i}", 5, time.time()))

    asyncio.run(run())


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"gistbot {version()}"
    assert version()[0].isdigit()


@pytest.mark.parametrize("name", ["run", "console", "channels", "summary", "export", "doctor",
                                  "migrate", "copy-db", "discord-invite"])
def test_each_command_help_says_what_the_command_does(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The README sends people to `gistbot COMMAND --help`: it must say more than the options.
    with pytest.raises(SystemExit) as info:
        main([name, "--help"])
    assert info.value.code == 0
    usage, _, rest = capsys.readouterr().out.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert usage.startswith(f"usage: gistbot {name}")
    assert not description.startswith("options:") and description.rstrip().endswith(".")


def test_console_help_names_the_default_channel(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["console", "--help"])
    assert "(default: general)" in " ".join(capsys.readouterr().out.split())


def test_channels_lists_remembered_channels_with_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envf = env_file(tmp_path)
    assert main(["--env-file", envf, "channels"]) == 0
    assert "no database at" in capsys.readouterr().err  # a reading command creates none

    seed(tmp_path / "cli.db", {SLACK: 3, CONSOLE: 1})
    assert main(["--env-file", envf, "channels"]) == 0
    captured = capsys.readouterr()
    rows = [line.split() for line in captured.out.splitlines()]
    assert rows[0][:2] == ["CHANNEL", "MESSAGES"]
    assert [r[:3] for r in rows[1:]] == [["slack:T1:C1", "3", "0"], ["general", "1", "0"]]
    assert "2 channels in" in captured.err
    # every listed name is accepted by --channel
    assert main(["--env-file", envf, "summary", "--channel", "general"]) == 0
    assert "Remembering 1 message (" in capsys.readouterr().out


def test_summary_and_export_of_an_unknown_channel_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    envf = env_file(tmp_path)
    seed(tmp_path / "cli.db", {SLACK: 1})
    for command in ("summary", "export"):
        assert main(["--env-file", envf, command, "--channel", "nosuch"]) == 1
        captured = capsys.readouterr()
        assert "no channel 'nosuch'" in captured.err and "gistbot channels" in captured.err
        assert captured.out == ""


@pytest.mark.parametrize("bad", ["abc", "12345", "1234567890123456789012", "-1", "12e17"])
def test_discord_invite_checks_the_application_id(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["discord-invite", "--application-id", bad]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "not a Discord application ID" in captured.err


def test_discord_invite_with_a_real_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["discord-invite", "--application-id", "1234567890123456789"]) == 0
    assert "client_id=1234567890123456789" in capsys.readouterr().out


@pytest.mark.slow
def test_export_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # 200 turns of 2 kB: more than a pipe holds, so the writer meets the closed end.
    seed(tmp_path / "gistbot.db", {CONSOLE: 200}, text="x" * 2000)
    env = console_env(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "--env-file", os.devnull,
         "export", "--channel", "general"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b'{"type": "channel"')
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == "", err


def test_counts_of_one_are_singular(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stats = ChannelStats(CONSOLE, turns=1, folded=0, pending=1, pending_tokens=5,
                         summary_tokens=0, facts=1, compactions=0, last_compacted_at=None,
                         version=0)
    assert footer(stats).startswith("Remembering 1 message (0 summarized, 1 verbatim) · "
                                    "1 kept identifier · ")
    envf = env_file(tmp_path)
    seed(tmp_path / "cli.db", {SLACK: 1})
    assert main(["--env-file", envf, "migrate"]) == 0
    assert "(1 channel stored)" in capsys.readouterr().out
    assert main(["--env-file", envf, "doctor"]) == 0
    assert "ok: 1 channel stored" in capsys.readouterr().out
    assert main(["--env-file", envf, "export", "--channel", "slack:T1:C1",
                 "-o", str(tmp_path / "x.jsonl")]) == 0
    assert "exported 1 message of slack:T1:C1" in capsys.readouterr().err


@pytest.mark.slow
def test_unwritable_database_is_one_line_and_leaves_no_thread_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from memory.errors import StoreOpenError

    (tmp_path / "adir.db").mkdir()  # a folder where the file should be: cannot be opened
    failures: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))

    async def open_it() -> None:
        with pytest.raises(StoreOpenError, match="not writable"):
            await SqliteStore(tmp_path / "adir.db").open()

    def workers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if "_connection_worker_thread" in t.name]

    for _ in range(5):
        asyncio.run(open_it())
        # aiosqlite's worker thread must be gone before the event loop is: a thread that
        # outlives it reports to a closed loop ("Event loop is closed").
        assert workers() == []
    assert failures == []

    env = console_env(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path}/adir.db")
    done = subprocess.run(
        [sys.executable, "-m", "bot", "--env-file", os.devnull, "console"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=tmp_path, env=env,
        timeout=60, check=False,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"gistbot: cannot open the database {tmp_path}/adir.db: the file or its folder is "
        "not writable; fix permissions or DATABASE_URL"
    ]
