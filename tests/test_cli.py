"""The ``gistbot`` command: help, doctor (secrets masked, failing checks), summary, export."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from bot.cli import main, parse_channel
from bot.errors import ConfigError
from bot.settings import load_settings
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore

SECRET = "MTIzNDU2Nzg5.discord-secret-token-value"


def env_file(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "cli.env"
    path.write_text(f"DATABASE_URL=sqlite:///{tmp_path}/cli.db\nLOG_LEVEL=WARNING\n{extra}")
    return str(path)


@pytest.mark.parametrize(
    "command", ["run", "console", "summary", "export", "doctor", "discord-invite"]
)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage: gistbot" in capsys.readouterr().out


def test_doctor_masks_secrets_and_passes_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--env-file", env_file(tmp_path, f"DISCORD_TOKEN={SECRET}\n"), "doctor"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert SECRET not in out and "MTI…ue" in out
    assert "discord" in out and "database   ok" in out and "llm        ok" in out


def test_doctor_reports_an_unreachable_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = "OPENAI_BASE_URL=http://127.0.0.1:9/v1\nLLM_MAX_RETRIES=0\nLLM_TIMEOUT=3\n"
    code = main(["--env-file", env_file(tmp_path, extra), "doctor"])
    out = capsys.readouterr().out
    assert code == 1
    assert "llm        FAILED" in out


def test_bad_configuration_exits_2_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--env-file", env_file(tmp_path, "OPENAI_API_KEY=YOUR_API_KEY\n"), "doctor"])
    err = capsys.readouterr().err
    assert code == 2
    assert "OPENAI_API_KEY" in err and "placeholder" in err and "Traceback" not in err


def test_summary_and_export_of_a_stored_channel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = ChannelKey("slack", "T1", "C1")

    async def seed() -> None:
        async with SqliteStore(tmp_path / "cli.db") as store:
            for i in range(3):
                await store.record(
                    NewTurn(
                        key,
                        f"m{i}",
                        "user",
                        "u1",
                        "미나",
                        f"주문 ORD-{i} 확인 부탁해요",
                        5,
                        time.time(),
                    )
                )

    asyncio.run(seed())
    envf = env_file(tmp_path)
    assert main(["--env-file", envf, "summary", "--channel", "slack:T1:C1"]) == 0
    assert "Remembering 3 messages" in capsys.readouterr().out

    out_file = tmp_path / "export.jsonl"
    assert (
        main(["--env-file", envf, "export", "--channel", "slack:T1:C1", "-o", str(out_file)]) == 0
    )
    rows = [json.loads(line) for line in out_file.read_text(encoding="utf-8").splitlines()]
    assert rows[0]["type"] == "channel" and rows[0]["channel"] == "C1"
    assert [r["text"] for r in rows[1:]] == [f"주문 ORD-{i} 확인 부탁해요" for i in range(3)]
    assert all(r["folded"] is False for r in rows[1:])


def test_channel_specs() -> None:
    assert parse_channel("general") == ChannelKey("console", "local", "general")
    assert parse_channel("discord:1:2") == ChannelKey("discord", "1", "2")
    with pytest.raises(ConfigError, match="platform:workspace:channel"):
        parse_channel("discord:1")


def test_placeholder_key_never_reaches_the_api() -> None:
    with pytest.raises(ConfigError):
        load_settings({"OPENAI_API_KEY": "YOUR_API_KEY"})


def test_secret_filter_scrubs_messages_and_tracebacks() -> None:
    import logging

    from bot.ops.logs import SecretFilter

    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "token is %s", (SECRET,), None)
    try:
        raise RuntimeError(f"auth failed for {SECRET}")
    except RuntimeError:
        import sys

        record.exc_info = sys.exc_info()
    SecretFilter([SECRET]).filter(record)
    assert SECRET not in record.getMessage()
    assert record.exc_text is not None and SECRET not in record.exc_text
    assert "***" in record.getMessage()


@pytest.mark.parametrize("command", ["doctor", "run", "console", "channels", "migrate"])
def test_a_missing_env_file_is_one_line_and_status_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "prod.env"
    assert main(["--env-file", str(missing), command]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"gistbot: --env-file {missing}: no such file\n"
    assert captured.out == "" and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("args", "status"),
    [(["channels"], 0), (["summary", "--channel", "general"], 1),
     (["export", "--channel", "general"], 1)],
)
def test_reading_commands_create_no_database(
    args: list[str], status: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--env-file", env_file(tmp_path), *args]) == status
    err = capsys.readouterr().err
    assert f"no database at {tmp_path}/cli.db" in err
    assert not (tmp_path / "cli.db").exists()


def test_env_file_works_after_the_command_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def seed() -> None:
        async with SqliteStore(tmp_path / "cli.db") as store:
            await store.record(NewTurn(ChannelKey("console", "local", "ops"), "m1", "user",
                                       "u1", "Mina", "hello", 1, time.time()))

    asyncio.run(seed())
    envf = env_file(tmp_path)
    assert main(["channels", "--env-file", envf]) == 0  # was: "unrecognized arguments"
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["ops", "1"]
    for command in (["doctor"], ["console"], ["summary", "--channel", "ops"], ["migrate"]):
        missing = str(tmp_path / "prod.env")
        assert main([*command, "--env-file", missing]) == 2, command
        assert capsys.readouterr().err == f"gistbot: --env-file {missing}: no such file\n"
    # Given twice, the one after the command is the one read.
    assert main(["--env-file", str(tmp_path / "absent.env"), "channels", "--env-file",
                 envf]) == 0
