"""One typed settings object, read from environment variables and ``.env``, checked at start.

Every error names the variable and says how to fix it (``ConfigError``). Tests build
settings with ``load_settings(environ={...}, env_file=None)`` so the developer's own
environment never leaks in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlparse

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.errors import ConfigError
from bot.redact import url_secrets

__all__ = ["DEFAULT_SYSTEM_PROMPT", "Settings", "load_settings", "looks_like_placeholder"]

DEFAULT_SYSTEM_PROMPT = (
    "You are gistbot, a helpful member of this chat. Answer the person who addressed you, "
    "briefly and in the language they used. Use what you remember of the conversation when "
    "it helps; say so when you do not know."
)
# A value copied from documentation rather than a key: a whole word (changeme, todo), or a
# tell anywhere in it: an ellipsis, <angle brackets>, a leading "your", a run of x's set off
# by punctuation (sk-xxx, xoxb-xxxx-xxxx) or six long. Random keys can hold "xxx" between
# letters, so a short run inside a word is not a tell. Non-ASCII is checked apart.
_PLACEHOLDER = re.compile(
    r"^(changeme|replace[-_ ]?me|todo|none|null|api[-_ ]?key)$"
    r"|^your|\.\.\.|…|<.*>|(?:^|[^a-z0-9])x{3,}(?:$|[^a-z0-9])|x{6,}",
    re.IGNORECASE,
)


def looks_like_placeholder(value: str) -> bool:
    """Whether a key or token is a placeholder, not a real one (real ones are plain ASCII)."""
    value = value.strip()
    return not value.isascii() or _PLACEHOLDER.search(value) is not None

CsvList = Annotated[list[str], NoDecode]


def _csv(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _at_least_one(value: int, what: str) -> int:
    if value < 1:
        raise ValueError(f"must be at least 1, not {value}: it is how many {what}")
    return value


class Settings(BaseSettings):
    """All of gistbot's configuration. Field names are the variable names, lowercased."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False)

    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    model_name: str = "gpt-4o-mini"
    summary_model_name: str | None = None
    llm_provider: Literal["openai", "offline"] | None = None
    llm_timeout: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(2, ge=0, le=10)
    summary_timeout: float = Field(120.0, gt=0)
    llm_concurrency: int = 4  # model calls at once to the endpoint, replies first
    embedding_model: str | None = Field(None, description=(
        "Embedding model on the OpenAI-compatible endpoint of OPENAI_BASE_URL / "
        "OPENAI_API_KEY (text-embedding-3-small, nomic-embed-text, …), also with "
        "LLM_PROVIDER=offline. Set, old messages are also recalled by meaning, fused with "
        "word search; unset (the default), recall is by words only and no embedding is "
        "requested."))
    embedding_timeout: float = Field(2.0, gt=0, description=(
        "Seconds a reply waits for its message's embedding before it recalls by words "
        "only."))
    summary_concurrency: int = 8  # background summaries at once, process-wide

    database_url: str = "sqlite:///gistbot.db"
    database_pool_size: int = Field(10, ge=1, le=200)
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = "FULL"
    retention_days: float | None = Field(None, gt=0)

    # Unset: a token window derived from the budget (bot.budget); set: the message window.
    max_history_messages: int | None = Field(None, ge=2)
    keep_recent_messages: int | None = Field(None, ge=0)
    window_tokens: int = Field(0, ge=0)
    keep_tokens: int = Field(0, ge=0)
    summary_tokens: int | None = Field(None, ge=50)  # unset: derived (summary_bound)
    facts_tokens: int = Field(300, ge=0)
    recall_tokens: int | None = Field(None, ge=0)  # recall per reply; unset = what is left; 0 = off
    context_tokens: int = Field(8000, ge=512)
    reply_tokens: int = Field(800, ge=16)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    record_mode: Literal["all", "addressed"] = "all"
    always_reply_channels: CsvList = []
    stream_replies: bool = False
    user_rate_limit: int = Field(20, ge=0)  # replies per user per minute; 0 = no limit
    max_input_chars: int = Field(40_000, ge=0)  # longer messages are cut; 0 = no limit
    backfill_max_messages: int = 500  # missed messages read back per channel; 0 = off
    # Shutdown and restarts: how long SIGTERM/SIGINT waits for replies in flight;
    # how old a mention left unanswered by a crash may be and still be answered (0 = never);
    # how long a replica's claim on a mention it is answering lasts without renewal.
    shutdown_grace_seconds: float = Field(20.0, gt=0, le=3600)
    answer_missed_seconds: float = Field(300.0, ge=0)
    reply_claim_seconds: float = Field(30.0, ge=1, le=3600)
    # per-channel settings and quotas (bot.channel_config, bot.quota); 0 = no limit
    allowed_models: CsvList = []  # models /config may choose; empty = just MODEL_NAME
    daily_tokens_per_user: int = Field(0, ge=0)
    daily_tokens_per_server: int = Field(0, ge=0)
    # Files and images people attach (bot.attachments)
    attachment_max_chars: int = Field(20_000, ge=0)  # text kept per message; 0 = not read
    attachment_max_bytes: int = Field(8 * 1024 * 1024, ge=0)  # larger files are not fetched
    attachment_timeout: float = Field(15.0, gt=0, le=600)  # seconds per file download
    vision: Literal["auto", "on", "off"] = "auto"
    vision_models: CsvList = []  # models known to accept images, beyond gpt-4o / gpt-4.1

    discord_token: SecretStr | None = None
    discord_guild_ids: CsvList = []
    discord_reset_permission: str = "manage_messages"
    shard_count: int | None = Field(None, ge=1)
    shard_ids: Annotated[list[int], NoDecode] = []
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_admin_user_ids: CsvList = []
    host: str = "127.0.0.1"
    port: int = Field(3000, ge=0, le=65535)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    # The admin server (bot.admin): off unless ADMIN_PORT is set; loopback unless ADMIN_HOST.
    admin_port: int | None = Field(None, ge=0, le=65535)
    admin_host: str = "127.0.0.1"
    admin_inspector: bool = False  # the memory inspector page; needs ADMIN_TOKEN
    admin_token: SecretStr | None = None
    summary_history: int = Field(20, ge=0, le=1000)  # summary versions kept per channel
    timezone: str = "UTC"  # /catchup and /digest when no zone is given (bot/since.py)

    _csv_fields = field_validator(
        "always_reply_channels",
        "allowed_models",
        "vision_models",
        "discord_guild_ids",
        "slack_admin_user_ids",
        "shard_ids",
        mode="before",
    )(_csv)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator(
        "openai_api_key",
        "openai_base_url",
        "summary_model_name",
        "llm_provider",
        "discord_token",
        "slack_bot_token",
        "slack_app_token",
        "slack_signing_secret",
        "retention_days",
        "shard_count",
        "max_history_messages",
        "keep_recent_messages",
        "recall_tokens",
        "summary_tokens",
        "admin_port",
        "admin_token",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, v: Any) -> Any:
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("openai_api_key")
    @classmethod
    def _not_placeholder(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and looks_like_placeholder(v.get_secret_value()):
            raise ValueError(
                "looks like a placeholder, not a real key; put your key in .env, "
                "or remove the line to run with the offline model"
            )
        return v

    @field_validator("discord_token", "slack_bot_token", "slack_app_token",
                     "slack_signing_secret", "admin_token")
    @classmethod
    def _not_placeholder_token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and looks_like_placeholder(v.get_secret_value()):
            raise ValueError(
                "looks like a placeholder, not a real token; paste the real one, "
                "or remove the line"
            )
        return v

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        from bot.since import SinceError, parse_zone

        try:
            return parse_zone(v.strip() or "UTC").key
        except SinceError as e:
            raise ValueError(str(e)) from None

    @field_validator("llm_concurrency")
    @classmethod
    def _slots(cls, v: int) -> int:
        what = "model calls at once to the endpoint: its parallel slots, e.g. 1 for a one-slot"
        return _at_least_one(v, f"{what} llama.cpp server (default 4)")

    @field_validator("summary_concurrency")
    @classmethod
    def _summary_slots(cls, v: int) -> int:
        return _at_least_one(v, "background summary calls at once (default 8)")

    @field_validator("backfill_max_messages")
    @classmethod
    def _backfill(cls, v: int) -> int:
        if not 0 <= v <= 100_000:
            raise ValueError(
                f"must be between 0 (no backfill after downtime) and 100000, not {v}: it is "
                "how many missed messages per channel are read back after a restart (default 500)"
            )
        return v

    @field_validator("openai_base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parsed = urlparse(v.strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(
                "must be an http(s) URL such as http://localhost:11434/v1 (Ollama) "
                "or https://api.openai.com/v1"
            )
        return v.strip().rstrip("/")

    @field_validator("database_url")
    @classmethod
    def _db_url(cls, v: str) -> str:
        if v.startswith("sqlite:///") and len(v) > len("sqlite:///"):
            return v
        if v.startswith(("postgresql://", "postgres://")):
            return v
        raise ValueError(
            "must be sqlite:///path/to/file.db (default sqlite:///gistbot.db) "
            "or postgresql://user@host/db"
        )

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        problems: list[str] = []
        most, keep = self.max_history_messages, self.keep_recent_messages
        if keep is not None and keep >= (most or 10):
            problems.append(
                f"KEEP_RECENT_MESSAGES ({keep}) must be smaller than "
                f"MAX_HISTORY_MESSAGES ({most or 10}); e.g. 4 and 10"
            )
        if self.window_tokens and self.keep_tokens >= self.window_tokens:
            problems.append(
                f"KEEP_TOKENS ({self.keep_tokens}) must be smaller than WINDOW_TOKENS "
                f"({self.window_tokens})"
            )
        if self.reply_tokens + self.summary_bound + self.facts_tokens + 256 > self.context_tokens:
            problems.append(
                f"CONTEXT_TOKENS ({self.context_tokens}) leaves no room for the conversation "
                f"after REPLY_TOKENS ({self.reply_tokens}), SUMMARY_TOKENS "
                f"({self.summary_bound}) and FACTS_TOKENS ({self.facts_tokens}); raise "
                "CONTEXT_TOKENS or lower the others"
            )
        if self.llm_provider == "openai" and not (self.openai_api_key or self.openai_base_url):
            problems.append(
                "LLM_PROVIDER=openai needs OPENAI_API_KEY (for api.openai.com) or "
                "OPENAI_BASE_URL (for Ollama, vLLM, LM Studio, …)"
            )
        if self.embedding_model and not (self.openai_base_url or self.openai_api_key):
            problems.append(
                "EMBEDDING_MODEL needs an embedding endpoint: set OPENAI_BASE_URL (Ollama, "
                "llama.cpp, …) or OPENAI_API_KEY, or unset EMBEDDING_MODEL"
            )
        if self.embedding_model is not None and not self.embedding_model.strip():
            problems.append("EMBEDDING_MODEL is empty: name a model, or unset it")
        if self.shard_ids and not self.shard_count:
            problems.append("SHARD_IDS needs SHARD_COUNT (the total number of shards)")
        if self.shard_count and any(i >= self.shard_count for i in self.shard_ids):
            problems.append(
                f"SHARD_IDS must be between 0 and SHARD_COUNT - 1 ({self.shard_count - 1})"
            )
        if self.slack_bot_token and not (self.slack_app_token or self.slack_signing_secret):
            problems.append(
                "SLACK_BOT_TOKEN is set but neither SLACK_APP_TOKEN (Socket Mode) nor "
                "SLACK_SIGNING_SECRET (HTTP mode) is; set one of them"
            )
        problems += self._admin_problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _admin_problems(self) -> list[str]:
        """The inspector changes memory, so it is never on without a strong token."""
        if not self.admin_inspector:
            return []
        token = self.admin_token.get_secret_value() if self.admin_token else ""
        if self.admin_port is None:
            return ["ADMIN_INSPECTOR=true needs ADMIN_PORT (the admin server's port, e.g. 9464)"]
        if len(token) < 16:
            return ["ADMIN_INSPECTOR=true needs ADMIN_TOKEN, a random secret of at least 16 "
                    "characters (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')"]
        return []

    # ------------------------------------------------------------------ derived

    @property
    def summary_bound(self) -> int:
        """``SUMMARY_TOKENS``, or by default a tenth of ``CONTEXT_TOKENS − REPLY_TOKENS``
        between 100 and 600: a small context keeps a small summary and room to recall."""
        if self.summary_tokens is not None:
            return self.summary_tokens
        return min(600, max(100, (self.context_tokens - self.reply_tokens) // 10))

    @property
    def model_allowlist(self) -> list[str]:
        """``ALLOWED_MODELS``, or just ``MODEL_NAME`` when unset: what ``/config`` may pick."""
        return list(dict.fromkeys(self.allowed_models)) or [self.model_name]

    @property
    def provider(self) -> Literal["openai", "offline"]:
        """``LLM_PROVIDER``, or ``openai`` when a key or base URL is set, else ``offline``."""
        if self.llm_provider is not None:
            return self.llm_provider
        return "openai" if (self.openai_api_key or self.openai_base_url) else "offline"

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file of ``DATABASE_URL``, or None for PostgreSQL."""
        if self.database_url.startswith("sqlite:///"):
            return Path(self.database_url[len("sqlite:///") :])
        return None

    @property
    def adapters(self) -> list[str]:
        """Platform adapters whose credentials are configured (none means: console)."""
        out = []
        if self.discord_token:
            out.append("discord")
        if self.slack_bot_token and (self.slack_app_token or self.slack_signing_secret):
            out.append("slack")
        return out

    def secrets(self) -> list[str]:
        """Every configured secret value, for log scrubbing."""
        values = [
            self.openai_api_key,
            self.discord_token,
            self.slack_bot_token,
            self.slack_app_token,
            self.slack_signing_secret,
            self.admin_token,
        ]
        urls = url_secrets(self.database_url) + url_secrets(self.openai_base_url)
        return [v.get_secret_value() for v in values if v is not None] + urls


def _explain(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        where = "/".join(str(p) for p in e.get("loc", ())).upper()
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        lines.append(f"{where}: {msg}" if where else msg)
    return "invalid configuration:\n  " + "\n  ".join(lines)


def load_settings(
    environ: Mapping[str, str] | None = None, *, env_file: str | Path | None = ".env"
) -> Settings:
    """Read and check settings; raise ``ConfigError`` that names each bad variable.

    With ``environ`` given, only that mapping is read (no process environment, no file).
    """
    try:
        if environ is not None:
            fields = Settings.model_fields
            data = {k.lower(): v for k, v in environ.items() if k.lower() in fields}
            return Settings.model_validate(data)
        return Settings(_env_file=env_file)  # type: ignore[call-arg]
    except ValidationError as e:
        raise ConfigError(_explain(e)) from None
