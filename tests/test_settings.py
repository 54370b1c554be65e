"""Every settings error names the variable and the fix; defaults give the offline console."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.plugins import configured_platforms
from bot.settings import load_settings


def test_defaults_are_offline_sqlite_console() -> None:
    s = load_settings({})
    assert s.llm.provider == "offline"
    assert s.database.database_url == "sqlite:///gistbot.db"
    assert configured_platforms(s) == []
    # derived window
    assert (s.memory.max_history_messages, s.memory.keep_recent_messages) == (None, None)
    assert s.memory.recall_tokens is None
    assert s.restarts.backfill_max_messages == 500
    assert (s.llm.embedding_model, s.llm.embedding_timeout) == (None, 2.0)  # semantic recall off


def test_key_or_base_url_selects_openai() -> None:
    assert load_settings({"OPENAI_API_KEY": "sk-real-looking-key-123"}).llm.provider == "openai"
    assert load_settings({"OPENAI_BASE_URL": "http://localhost:11434/v1"}).llm.provider == "openai"
    assert (
        load_settings({"OPENAI_BASE_URL": "http://x:1/v1", "LLM_PROVIDER": "offline"}).llm.provider
        == "offline"
    )


@pytest.mark.parametrize(
    ("env", "variable", "fix"),
    [
        ({"OPENAI_API_KEY": "YOUR_API_KEY"}, "OPENAI_API_KEY", "placeholder"),
        ({"OPENAI_API_KEY": "sk-..."}, "OPENAI_API_KEY", "placeholder"),
        ({"OPENAI_API_KEY": "<your key>"}, "OPENAI_API_KEY", "placeholder"),
        ({"OPENAI_BASE_URL": "localhost:11434"}, "OPENAI_BASE_URL", "http(s) URL"),
        ({"OPENAI_BASE_URL": "ftp://host/v1"}, "OPENAI_BASE_URL", "http(s) URL"),
        ({"KEEP_RECENT_MESSAGES": "10"}, "KEEP_RECENT_MESSAGES", "smaller than MAX_HISTORY"),
        (
            {"MAX_HISTORY_MESSAGES": "6", "KEEP_RECENT_MESSAGES": "8"},
            "KEEP_RECENT_MESSAGES",
            "smaller",
        ),
        ({"WINDOW_TOKENS": "1000", "KEEP_TOKENS": "2000"}, "KEEP_TOKENS", "smaller than WINDOW"),
        ({"CONTEXT_TOKENS": "1000", "REPLY_TOKENS": "800"}, "CONTEXT_TOKENS", "raise"),
        ({"LLM_PROVIDER": "openai"}, "LLM_PROVIDER", "OPENAI_API_KEY"),
        ({"LLM_PROVIDER": "anthropic"}, "LLM_PROVIDER", "openai"),
        ({"DATABASE_URL": "mysql://db"}, "DATABASE_URL", "sqlite:///"),
        ({"MAX_HISTORY_MESSAGES": "ten"}, "MAX_HISTORY_MESSAGES",
         "must be a whole number, not 'ten'"),
        ({"PORT": "70000"}, "PORT", "65535"),
        ({"BACKFILL_MAX_MESSAGES": "-1"}, "BACKFILL_MAX_MESSAGES", "0 (no backfill"),
        ({"BACKFILL_MAX_MESSAGES": "lots"}, "BACKFILL_MAX_MESSAGES", "whole number"),
        ({"LLM_TIMEOUT": "soon"}, "LLM_TIMEOUT", "LLM_TIMEOUT: must be a number, not 'soon'"),
        ({"STREAM_REPLIES": "maybe"}, "STREAM_REPLIES", "must be true or false, not 'maybe'"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL", "INFO"),
        ({"SHARD_IDS": "0,1"}, "SHARD_IDS", "SHARD_COUNT"),
        ({"SHARD_COUNT": "2", "SHARD_IDS": "0,2"}, "SHARD_IDS", "between 0 and"),
        ({"EMBEDDING_MODEL": "nomic-embed-text"}, "EMBEDDING_MODEL", "OPENAI_BASE_URL"),
        ({"EMBEDDING_MODEL": " ", "OPENAI_BASE_URL": "http://x:1/v1"}, "EMBEDDING_MODEL",
         "name a model"),
        ({"EMBEDDING_TIMEOUT": "0"}, "EMBEDDING_TIMEOUT", "greater than 0"),
    ],
)
def test_bad_settings_name_the_variable_and_fix(
    env: dict[str, str], variable: str, fix: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    message = str(info.value)
    assert variable in message
    assert fix in message


def test_lists_are_comma_separated_and_blank_secrets_unset() -> None:
    s = load_settings(
        {"ALWAYS_REPLY_CHANNELS": "C1, C2,", "OPENAI_API_KEY": "  ", "SLACK_ADMIN_USER_IDS": "U1"}
    )
    assert s.chat.always_reply_channels == ["C1", "C2"]
    assert s.slack.slack_admin_user_ids == ["U1"]
    assert s.llm.openai_api_key is None


def test_env_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / ".env"
    env.write_text("MAX_HISTORY_MESSAGES=20\nMODEL_NAME=llama3.1\n")
    monkeypatch.delenv("MAX_HISTORY_MESSAGES", raising=False)
    monkeypatch.delenv("MODEL_NAME", raising=False)
    s = load_settings(env_file=env)
    assert s.memory.max_history_messages == 20
    assert s.llm.model_name == "llama3.1"


def test_adapters_follow_tokens() -> None:
    s = load_settings(
        {"DISCORD_TOKEN": "abc.def.ghi", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    )
    assert configured_platforms(s) == ["discord", "slack"]
    http_mode = load_settings({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s3"})
    assert configured_platforms(http_mode) == ["slack"]
    with pytest.raises(ConfigError, match="SLACK_APP_TOKEN"):
        load_settings({"SLACK_BOT_TOKEN": "xoxb-1"})
