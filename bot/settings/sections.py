"""The sections of the settings tree: each is the configuration object a part of gistbot
takes (the LLM client, the store, the service, an adapter, catch-up …), declared once.

A field's name upper-cased is its environment variable (flat: ``MODEL_NAME``, not
``LLM__MODEL_NAME``); its type, default, bounds and description are declared here, and the
configuration reference is rendered from them (``bot.settings.doc``). Fields made with
``memory.config.tunable`` are not settings: code and tests set them. Checks that span
sections live on the tree itself (``bot.settings``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from bot.settings.access import AccessSettings, check_ids
from bot.settings.base import (
    CsvList,
    Section,
    at_least_one,
    blank_is_unset,
    endpoint_url,
    looks_like_placeholder,
    real_token,
    split_csv,
)
from bot.settings.providers import Provider, ProviderSettings
from bot.settings.zones import UnknownZone, parse_zone
from memory.config import tunable

__all__ = [
    "DEFAULT_SYSTEM_PROMPT", "AccessSettings", "AdminSettings", "AttachmentSettings",
    "BudgetSettings", "CatchupSettings", "ChatSettings", "DatabaseSettings", "DiscordSettings",
    "LLMSettings", "LogSettings", "Provider", "ProviderSettings", "QuotaSettings",
    "RestartSettings", "SlackSettings", "check_ids", "looks_like_placeholder",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are gistbot, a helpful member of this chat. Answer the person who addressed you, "
    "briefly and in the language they used. Use what you remember of the conversation when "
    "it helps; say so when you do not know."
)

class LLMSettings(Section):
    """The model endpoint: who answers, with which model, how long a call may take."""

    model_config = ConfigDict(title="Language model")

    openai_api_key: SecretStr | None = Field(default=None, description=(
        "Key for api.openai.com. A placeholder such as YOUR_API_KEY is an error."))
    openai_base_url: str | None = Field(default=None, description=(
        "Any OpenAI-compatible endpoint instead of api.openai.com: Ollama "
        "http://localhost:11434/v1, vLLM, llama.cpp, LM Studio, OpenRouter."))
    llm_provider: Literal["openai", "offline"] | None = Field(default=None, description=(
        "Which model answers. Unset: openai when a key or base URL is set, else offline "
        "(answers that no model is configured; extractive summaries). openai without a key "
        "or URL is an error, never a silent fallback."))
    model_name: str = Field(default="gpt-4o-mini", description="Model that writes the replies.")
    summary_model_name: str | None = Field(default=None, description=(
        "Model for summaries and /summary. Unset: MODEL_NAME."))
    llm_timeout: float = Field(default=60.0, gt=0, description=(
        "Seconds per reply request, counted from when the call gets its slot."))
    llm_max_retries: int = Field(default=2, ge=0, le=10, description=(
        "Retries of a failed request (Retry-After is honoured)."))
    summary_timeout: float = Field(default=120.0, gt=0, description="Seconds per summarizer call.")
    llm_concurrency: int = Field(default=4, description=(
        "Model calls at once to the endpoint: its parallel slots (1 for a one-slot "
        "llama.cpp). Replies and /summary go before background summaries and preempt one "
        "when every slot is taken; a channel's summary preempted once runs next time."))
    summary_concurrency: int = Field(default=8, description=(
        "Background summaries in flight at once, process-wide; the rest wait."))
    embedding_model: str | None = Field(default=None, description=(
        "Embedding model on the OpenAI-compatible endpoint of OPENAI_BASE_URL / "
        "OPENAI_API_KEY (text-embedding-3-small, nomic-embed-text, …), also with "
        "LLM_PROVIDER=offline. Set, old messages are also recalled by meaning, fused with "
        "word search; unset (the default), recall is by words only and no embedding is "
        "requested."))
    embedding_timeout: float = Field(default=2.0, gt=0, description=(
        "Seconds a reply waits for its message's embedding before it recalls by words "
        "only."))

    _blank = field_validator("openai_api_key", "openai_base_url", "summary_model_name",
                             "llm_provider", mode="before")(blank_is_unset)

    @field_validator("openai_api_key")
    @classmethod
    def _not_placeholder(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and looks_like_placeholder(v.get_secret_value()):
            raise ValueError(
                "looks like a placeholder, not a real key; put your key in .env, "
                "or remove the line to run with the offline model"
            )
        return v

    @field_validator("openai_base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return None if v is None else endpoint_url(v)

    @field_validator("llm_concurrency")
    @classmethod
    def _slots(cls, v: int) -> int:
        what = "model calls at once to the endpoint: its parallel slots, e.g. 1 for a one-slot"
        return at_least_one(v, f"{what} llama.cpp server (default 4)")

    @field_validator("summary_concurrency")
    @classmethod
    def _summary_slots(cls, v: int) -> int:
        return at_least_one(v, "background summary calls at once (default 8)")

    @property
    def provider(self) -> Literal["openai", "offline"]:
        """``LLM_PROVIDER``, or ``openai`` when a key or base URL is set, else ``offline``."""
        if self.llm_provider is not None:
            return self.llm_provider
        return "openai" if (self.openai_api_key or self.openai_base_url) else "offline"


class DatabaseSettings(Section):
    """Where memory and everything else is stored."""

    model_config = ConfigDict(title="Storage")

    database_url: str = Field(default="sqlite:///gistbot.db", description=(
        "sqlite:///relative/path.db, sqlite:////absolute/path.db, or "
        "postgresql://user:password@host:5432/db (needs the postgres extra; several "
        "replicas can share it; a #schema suffix picks a schema). The container image uses "
        "sqlite:////data/gistbot.db."))
    database_pool_size: int = Field(default=10, ge=1, le=200, description=(
        "PostgreSQL connections per process."))
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = Field(
        default="FULL", description=(
        "SQLite durability: FULL survives power loss, NORMAL survives process crashes."))
    summary_history: int = Field(default=20, ge=0, le=1000, description=(
        "Summary versions kept per channel for the inspector's history (0: none)."))

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

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file of ``DATABASE_URL``, or None for PostgreSQL."""
        if self.database_url.startswith("sqlite:///"):
            return Path(self.database_url[len("sqlite:///"):])
        return None


class BudgetSettings(Section):
    """A reply's prompt budget; ``bot.conversation.budget.Budget`` is computed from it once."""

    model_config = ConfigDict(title="Context budget")

    context_tokens: int = Field(default=8000, ge=512, description=(
        "The whole prompt budget of one reply, the reply included."))
    reply_tokens: int = Field(default=800, ge=16, description="Tokens reserved for the reply.")
    summary_tokens: int | None = Field(default=None, ge=50, description=(
        "Bound on the rolling summary. Unset: a tenth of CONTEXT_TOKENS - REPLY_TOKENS, "
        "between 100 and 600."))

    _blank = field_validator("summary_tokens", mode="before")(blank_is_unset)

    @property
    def summary_bound(self) -> int:
        """``SUMMARY_TOKENS``, or by default a tenth of ``CONTEXT_TOKENS − REPLY_TOKENS``
        between 100 and 600: a small context keeps a small summary and room to recall."""
        if self.summary_tokens is not None:
            return self.summary_tokens
        return min(600, max(100, (self.context_tokens - self.reply_tokens) // 10))


class ChatSettings(Section):
    """How the service answers: persona, what it records, limits per person and message."""

    model_config = ConfigDict(title="Behaviour")

    system_prompt: str = Field(default=DEFAULT_SYSTEM_PROMPT, description=(
        "The bot's instructions: the default persona (a channel or server may set its own "
        "with /config)."))
    record_mode: Literal["all", "addressed"] = Field(default="all", description=(
        "all: remember every human message the bot can see; addressed: only messages to the "
        "bot and its replies."))
    always_reply_channels: CsvList = Field(default=[], description=(
        "Comma-separated channel ids where every message gets a reply (elsewhere: mentions, "
        "DMs and replies to the bot)."))
    stream_replies: bool = Field(default=False, description=(
        "Edit the reply in place as the model writes it (at most once a second)."))
    user_rate_limit: int = Field(default=20, ge=0, description=(
        "Replies per person per minute; past it they are told once and their messages are "
        "still remembered. 0: no limit (the console is exempt)."))
    max_input_chars: int = Field(default=40_000, ge=0, description=(
        "Longest message kept, in characters; a longer one is stored cut with a marker and, "
        "when addressed to the bot, politely refused. 0: no limit."))

    bot_id: str = tunable("gistbot")  # who the bot is until a platform says (login)
    bot_name: str = tunable("gistbot")
    stream_interval: float = tunable(1.0)  # seconds between edits of a streamed reply
    post_timeout: float = tunable(30.0)  # seconds a platform call may take; then: unknown

    _csv = field_validator("always_reply_channels", mode="before")(split_csv)


class CatchupSettings(Section):
    """``/catchup`` and digests: the default zone, and the bounds of one catch-up."""

    model_config = ConfigDict(title="Catch-up and digests")

    timezone: str = Field(default="UTC", description=(
        "IANA time zone (e.g. Europe/Berlin) for /catchup words such as yesterday or noon, "
        "the times catch-ups print, and /digest times that name no zone."))

    bullets: int = tunable(8)  # points in an answer
    max_map_calls: int = tunable(16)  # stretches a long period is split into, at most
    max_messages: int = tunable(200_000)  # messages read per channel and period
    episodes_scan: int = tunable(2000)  # archive episodes looked through per catch-up

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            return parse_zone(v.strip() or "UTC").key
        except UnknownZone as e:
            raise ValueError(str(e)) from None


class QuotaSettings(Section):
    """What ``/config`` may choose and the daily token quotas (0 = no limit)."""

    model_config = ConfigDict(title="Per-channel settings and quotas")

    allowed_models: CsvList = Field(default=[], description=(
        "Comma-separated models a channel or server may choose with /config (e.g. "
        "gpt-4o-mini,gpt-4o). Unset: MODEL_NAME and the models PROVIDERS lists."))
    daily_tokens_per_user: int = Field(default=0, ge=0, description=(
        "Tokens one person may use a day per server, from the provider's reported usage "
        "(estimated when it reports none); "
        "reset at 00:00 UTC. 0: no limit."))
    daily_tokens_per_server: int = Field(default=0, ge=0, description=(
        "Tokens one server or workspace may use a day (replies and summaries); a server may "
        "set lower limits with /config, never higher. 0: no limit."))

    _csv = field_validator("allowed_models", mode="before")(split_csv)


class AttachmentSettings(Section):
    """Files and images people attach (``bot.attachments``)."""

    model_config = ConfigDict(title="Files and images")

    attachment_max_chars: int = Field(default=20_000, ge=0, description=(
        "Text read from a message's attachments (text, Markdown, code, CSV, JSON, YAML, "
        "logs, PDF text) that is kept with it, in characters; more is cut with a marker that "
        "says how much was left out. 0: attachments are not read, only named."))
    attachment_max_bytes: int = Field(default=8 * 1024 * 1024, ge=0, description=(
        "Largest attachment fetched, in bytes (checked before and during the download); a "
        "larger one is noted by name only."))
    attachment_timeout: float = Field(default=15.0, gt=0, le=600, description=(
        "Seconds one attachment may take to download, and again to read; how long a reply "
        "waits for files is ATTACHMENT_WAIT_SECONDS."))
    attachment_wait_seconds: float = Field(default=15.0, ge=0, le=600, description=(
        "Seconds a reply waits at most for files still being read on the messages its "
        "prompt shows (its own and earlier ones); past it the reply is made without them "
        "and its prompt says they are still being read. Their text joins their messages in "
        "memory whenever it arrives. 0: never wait."))
    attachment_cpu_seconds: int = Field(default=10, ge=1, le=600, description=(
        "CPU seconds reading one file (its text, a PDF's text, an image's size) may use; the "
        "worker process reading it is killed at this limit, and at ATTACHMENT_TIMEOUT seconds "
        "of wall-clock time, and the file is noted as unreadable."))
    attachment_memory_mb: int = Field(default=512, ge=128, le=65_536, description=(
        "Memory (address space, MiB) of a worker process reading files; a file needing more "
        "is noted as unreadable."))
    attachment_workers: int = Field(default=2, ge=1, le=32, description=(
        "Worker processes that read files, started when the first file arrives; more files "
        "wait for a free one. The bot's own process never parses a file."))
    vision: Literal["auto", "on", "off"] = Field(default="auto", description=(
        "Send images to the model: auto (models known to accept images: gpt-4o, gpt-4.1 and "
        "VISION_MODELS), on or off. Without it an image is noted with its size."))
    vision_models: CsvList = Field(default=[], description=(
        "Comma-separated model names that accept images, for VISION=auto (e.g. "
        "llava,qwen2.5-vl)."))

    max_pixels: int = tunable(40_000_000)  # of an image sent to a model
    pdf_pages: int = tunable(200)  # read per PDF
    concurrency: int = tunable(4)  # downloads at once, across messages

    _csv = field_validator("vision_models", mode="before")(split_csv)


class RestartSettings(Section):
    """Restarts and downtime: backfill, shutdown grace, owed replies."""

    model_config = ConfigDict(title="Restarts and downtime")

    backfill_max_messages: int = Field(default=500, description=(
        "After downtime (start, gateway or socket reconnect), read back at most this many "
        "missed messages per remembered channel, the newest; they are remembered, not "
        "answered. 0: off."))
    shutdown_grace_seconds: float = Field(default=20.0, gt=0, le=3600, description=(
        "On SIGTERM or SIGINT, how long replies in flight may take before they are given up "
        "with an apology. Give the container manager more (docker-compose.yml: "
        "stop_grace_period)."))
    answer_missed_seconds: float = Field(default=300.0, ge=0, description=(
        "A mention whose reply was never delivered (crash, kill, failed delivery) is "
        "answered after the restart if it is younger than this; older ones are logged. 0: "
        "never."))
    reply_claim_seconds: float = Field(default=30.0, ge=1, le=3600, description=(
        "How long a process's claim on a mention it is answering lasts without renewal; "
        "after a crash the mention is answered once the claim ran out."))

    @field_validator("backfill_max_messages")
    @classmethod
    def _backfill(cls, v: int) -> int:
        if not 0 <= v <= 100_000:
            raise ValueError(
                f"must be between 0 (no backfill after downtime) and 100000, not {v}: it is "
                "how many missed messages per channel are read back after a restart (default 500)"
            )
        return v


class DiscordSettings(Section):
    """The Discord adapter's settings (``adapters.discord.options`` checks them at start)."""

    model_config = ConfigDict(title="Discord")

    discord_token: SecretStr | None = Field(default=None, description=(
        "The bot token; starts the Discord adapter."))
    discord_guild_ids: CsvList = Field(default=[], description=(
        "Comma-separated server ids whose slash commands are synced at once. Unset: global "
        "commands (they can take a while to appear)."))
    discord_reset_permission: str = Field(default="manage_messages", description=(
        "The Discord permission /reset and /forget require (any permission name)."))
    shard_count: int | None = Field(default=None, ge=1, description=(
        "Discord sharding: the total number of shards."))
    shard_ids: Annotated[list[int], NoDecode] = Field(default=[], description=(
        "Comma-separated shards this process runs (needs SHARD_COUNT). Unset: all."))

    _blank = field_validator("discord_token", "shard_count", mode="before")(blank_is_unset)
    _csv = field_validator("discord_guild_ids", "shard_ids", mode="before")(split_csv)
    _token = field_validator("discord_token")(real_token)


class SlackSettings(Section):
    """The Slack adapter's settings: Socket Mode with an app token, else HTTP mode."""

    model_config = ConfigDict(title="Slack")

    slack_bot_token: SecretStr | None = Field(default=None, description=(
        "The Bot User OAuth Token (xoxb-...); with SLACK_APP_TOKEN or SLACK_SIGNING_SECRET "
        "it starts the Slack adapter."))
    slack_app_token: SecretStr | None = Field(default=None, description=(
        "App-level token (xapp-..., connections:write) for Socket Mode: no public URL "
        "needed."))
    slack_signing_secret: SecretStr | None = Field(default=None, description=(
        "Signing secret for HTTP mode (events sent to a public URL)."))
    slack_admin_user_ids: CsvList = Field(default=[], description=(
        "Comma-separated user ids allowed, besides workspace admins and owners, to /reset, "
        "/forget, change /digest and change settings with /config."))
    host: str = Field(default="127.0.0.1", description=(
        "Where Slack HTTP mode listens (the container image sets 0.0.0.0)."))
    port: int = Field(default=3000, ge=0, le=65535, description="Slack HTTP mode's port.")

    _blank = field_validator("slack_bot_token", "slack_app_token", "slack_signing_secret",
                             mode="before")(blank_is_unset)
    _csv = field_validator("slack_admin_user_ids", mode="before")(split_csv)
    _token = field_validator("slack_bot_token", "slack_app_token",
                             "slack_signing_secret")(real_token)

    @property
    def configured(self) -> bool:
        """A bot token and a way to receive events (Socket Mode or HTTP mode)."""
        return bool(self.slack_bot_token and (self.slack_app_token or self.slack_signing_secret))


class LogSettings(Section):
    """What is logged, and how."""

    model_config = ConfigDict(title="Logs")

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO", description=(
        "How much is logged. Secrets are scrubbed from every line; tracebacks only at "
        "DEBUG."))
    log_format: Literal["text", "json"] = Field(default="text", description=(
        "json: one JSON object per line with the channel and request id."))

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class AdminSettings(Section):
    """The admin server (``bot.admin``): off unless ADMIN_PORT; loopback unless ADMIN_HOST."""

    model_config = ConfigDict(title="The admin server")

    admin_port: int | None = Field(default=None, ge=0, le=65535, description=(
        "Port of the admin server (/healthz, /readyz, /metrics, the inspector), e.g. 9464. "
        "Unset: off."))
    admin_host: str = Field(default="127.0.0.1", description=(
        "Where the admin server listens (0.0.0.0 to be scraped from another container)."))
    admin_inspector: bool = Field(default=False, description=(
        "The memory inspector web page (reads and changes memory); needs ADMIN_PORT and "
        "ADMIN_TOKEN."))
    admin_token: SecretStr | None = Field(default=None, description=(
        "The inspector's login secret, at least 16 random characters."))

    _blank = field_validator("admin_port", "admin_token", mode="before")(blank_is_unset)
    _token = field_validator("admin_token")(real_token)

    def problems(self) -> list[str]:
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
