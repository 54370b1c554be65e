"""Misspelt settings (issue 15): ``MAX_HISTORY_MESSAGE=5`` in ``.env`` is named once, with
the setting it was probably meant to be, instead of being silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.settings.env_check import known_settings, typo_warnings


def write_env(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "typo.env"
    path.write_text(f"DATABASE_URL=sqlite:///{tmp_path}/t.db\nLOG_LEVEL=WARNING\n{extra}")
    return path


def test_a_typo_in_env_is_warned_once_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_HISTORY_MESSAGE", "7")  # the same name in both: said once
    env = write_env(tmp_path, "MAX_HISTORY_MESSAGE=5\nPOSTGRES_PASSWORD=x\nOPENAI_KEY=sk\n")
    assert main(["--env-file", str(env), "migrate"]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert lines == [
        f"warning: unknown setting MAX_HISTORY_MESSAGE in {env}; did you mean "
        "MAX_HISTORY_MESSAGES?",
        f"warning: unknown setting OPENAI_KEY in {env}; did you mean OPENAI_API_KEY?",
    ]


def test_environment_variables_count_only_when_they_look_like_gistbots(tmp_path: Path) -> None:
    environ = {"PATH": "/bin", "HOSTNAME": "box", "HOME": "/root", "LOGLEVEL": "DEBUG",
               "DISCORD_BOT_TOKEN": "x", "PORT": "8080", "model_name": "m",
               "TIKTOKEN_CACHE_DIR": "/c", "TERM": "xterm"}
    assert typo_warnings(None, environ) == [
        "unknown setting LOGLEVEL in the environment; did you mean LOG_LEVEL?",
        "unknown setting DISCORD_BOT_TOKEN in the environment; did you mean DISCORD_TOKEN?",
    ]


def test_known_names_and_a_missing_file_say_nothing(tmp_path: Path) -> None:
    env = write_env(tmp_path, "".join(f"{name}=\n" for name in known_settings()))
    assert typo_warnings(env, {}) == []
    assert typo_warnings(tmp_path / "absent.env", {}) == []
