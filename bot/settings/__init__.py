"""The settings tree: one typed object of sections (``bot.settings.sections``, ``memory.config``),
read from flat environment variables and ``.env``, checked at start.

Each section is the configuration object its part takes (``settings.memory`` goes to the
``MemoryManager``, ``settings.discord`` to the Discord adapter …). Variables stay flat
(``CONTEXT_TOKENS``): every section field is one variable, its name upper-cased, and
``FIELDS`` maps each variable to its section, derived from the declarations. Every error
names the variable and says how to fix it (``ConfigError``). Tests build settings with
``load_settings(environ={...}, env_file=None)`` so the developer's environment never leaks
in.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from bot.errors import ConfigError
from bot.settings.redact import url_secrets
from bot.settings.sections import (
    DEFAULT_SYSTEM_PROMPT,
    AccessSettings,
    AdminSettings,
    AttachmentSettings,
    BudgetSettings,
    CatchupSettings,
    ChatSettings,
    DatabaseSettings,
    DiscordSettings,
    LLMSettings,
    LogSettings,
    ProviderSettings,
    QuotaSettings,
    RestartSettings,
    SlackSettings,
    looks_like_placeholder,
)
from memory.config import MemoryConfig

__all__ = ["DEFAULT_SYSTEM_PROMPT", "Field", "Settings", "fields", "load_settings",
           "looks_like_placeholder"]


class Field(NamedTuple):
    """One setting: its variable, where it lives in the tree, and its declaration."""

    variable: str
    section: str
    name: str
    info: FieldInfo


def fields(tree: type[BaseModel]) -> Iterator[Field]:
    """Every setting of ``tree``, section by section in declaration order; a section's
    ``tunable`` fields are not settings."""
    for section, info in tree.model_fields.items():
        model = info.annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"Settings.{section} is not a section: every setting lives in one")
        for name, field in model.model_fields.items():
            if not field.exclude:
                yield Field(name.upper(), section, name, field)


def _nest(tree: type[BaseModel], data: Mapping[str, Any]) -> dict[str, Any]:
    """Flat ``{variable: value}`` (any case) as ``{section: {field: value}}``; nested input
    passes through, unknown names are dropped (``.env`` is shared with other programs)."""
    where = {f.variable.lower(): f for f in fields(tree)}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in tree.model_fields and not isinstance(value, str):
            out[key] = value if isinstance(value, BaseModel) else {**out.get(key, {}), **value}
        elif (f := where.get(key.lower())) is not None:
            section = out.setdefault(f.section, {})
            if isinstance(section, BaseModel):
                section = out[f.section] = section.model_dump()
            section[f.name] = value
    return out


class _FlatEnvironment(PydanticBaseSettingsSource):
    """The process environment over ``.env``, flat names kept (nested by ``_nest``)."""

    def __init__(self, settings_cls: type[BaseSettings], *layers: Mapping[str, str | None]):
        super().__init__(settings_cls)
        self.layers = layers

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: ``__call__`` reads the flat variables directly."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        known = {f.variable.lower() for f in fields(self.settings_cls)}
        out: dict[str, Any] = {}
        for layer in self.layers:
            out.update({k.lower(): v for k, v in layer.items()
                        if k.lower() in known and v is not None})
        return out


class Settings(BaseSettings):
    """All of gistbot's configuration, as sections; see the module docstring."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False,
                                      frozen=True)

    llm: LLMSettings = LLMSettings()
    providers: ProviderSettings = ProviderSettings()
    database: DatabaseSettings = DatabaseSettings()
    budget: BudgetSettings = BudgetSettings()
    memory: MemoryConfig = MemoryConfig()
    chat: ChatSettings = ChatSettings()
    access: AccessSettings = AccessSettings()
    quotas: QuotaSettings = QuotaSettings()
    attachments: AttachmentSettings = AttachmentSettings()
    catchup: CatchupSettings = CatchupSettings()
    restarts: RestartSettings = RestartSettings()
    discord: DiscordSettings = DiscordSettings()
    slack: SlackSettings = SlackSettings()
    logs: LogSettings = LogSettings()
    admin: AdminSettings = AdminSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments, then the environment, then ``.env``: all by flat name."""
        assert isinstance(init_settings, InitSettingsSource)
        assert isinstance(env_settings, EnvSettingsSource)
        assert isinstance(dotenv_settings, DotEnvSettingsSource)
        return (init_settings,
                _FlatEnvironment(settings_cls, dotenv_settings.env_vars, env_settings.env_vars))

    @model_validator(mode="before")
    @classmethod
    def _sections(cls, data: Any) -> Any:
        return _nest(cls, data) if isinstance(data, Mapping) else data

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        problems = self.memory.window_problems()
        budget = self.budget
        if (budget.reply_tokens + budget.summary_bound + self.memory.facts_tokens + 256
                > budget.context_tokens):
            problems.append(
                f"CONTEXT_TOKENS ({budget.context_tokens}) leaves no room for the conversation "
                f"after REPLY_TOKENS ({budget.reply_tokens}), SUMMARY_TOKENS "
                f"({budget.summary_bound}) and FACTS_TOKENS ({self.memory.facts_tokens}); "
                "raise CONTEXT_TOKENS or lower the others"
            )
        llm = self.llm
        problems += self._provider_problems()
        if (llm.llm_provider == "openai" and not (llm.openai_api_key or llm.openai_base_url)
                and not self.providers.providers):
            problems.append(
                "LLM_PROVIDER=openai needs OPENAI_API_KEY (for api.openai.com) or "
                "OPENAI_BASE_URL (for Ollama, vLLM, LM Studio, …)"
            )
        if llm.embedding_model and not (llm.openai_base_url or llm.openai_api_key):
            problems.append(
                "EMBEDDING_MODEL needs an embedding endpoint: set OPENAI_BASE_URL (Ollama, "
                "llama.cpp, …) or OPENAI_API_KEY, or unset EMBEDDING_MODEL"
            )
        if llm.embedding_model is not None and not llm.embedding_model.strip():
            problems.append("EMBEDDING_MODEL is empty: name a model, or unset it")
        discord = self.discord
        if discord.shard_ids and not discord.shard_count:
            problems.append("SHARD_IDS needs SHARD_COUNT (the total number of shards)")
        if discord.shard_count and any(i >= discord.shard_count for i in discord.shard_ids):
            problems.append(
                f"SHARD_IDS must be between 0 and SHARD_COUNT - 1 ({discord.shard_count - 1})"
            )
        if self.slack.slack_bot_token and not self.slack.configured:
            problems.append(
                "SLACK_BOT_TOKEN is set but neither SLACK_APP_TOKEN (Socket Mode) nor "
                "SLACK_SIGNING_SECRET (HTTP mode) is; set one of them"
            )
        problems += self.admin.problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _provider_problems(self) -> list[str]:
        """Without a default endpoint, every model named must be one a provider serves."""
        llm, named = self.llm, self.providers
        if not named.providers or llm.openai_api_key or llm.openai_base_url:
            return []
        wanted = {"MODEL_NAME": [llm.model_name],
                  "SUMMARY_MODEL_NAME": [llm.summary_model_name or llm.model_name],
                  "ALLOWED_MODELS": list(self.quotas.allowed_models)}
        return [f"{var}={model} is served by no provider: list it in a PROVIDERS entry's "
                "models, or set OPENAI_BASE_URL / OPENAI_API_KEY for it"
                for var, models in wanted.items() for model in models
                if named.provider_of(model) is None]

    # ------------------------------------------------------------------ derived

    @property
    def model_provider(self) -> str:
        """``openai`` or ``offline``: ``LLM_PROVIDER``, or by default ``openai`` when an
        endpoint is configured (``OPENAI_*`` or ``PROVIDERS``), else ``offline``."""
        if self.llm.llm_provider is None and self.providers.providers:
            return "openai"
        return self.llm.provider

    def flat(self) -> dict[str, Any]:
        """Every setting's value by variable, in the reference's order (``gistbot doctor``)."""
        return {f.variable: getattr(getattr(self, f.section), f.name)
                for f in fields(type(self))}

    def secrets(self) -> list[str]:
        """Every configured secret value, for log scrubbing."""
        values = [
            self.llm.openai_api_key,
            self.discord.discord_token,
            self.slack.slack_bot_token,
            self.slack.slack_app_token,
            self.slack.slack_signing_secret,
            self.admin.admin_token,
        ]
        urls = url_secrets(self.database.database_url) + url_secrets(self.llm.openai_base_url)
        for provider in self.providers.providers.values():
            values.append(provider.api_key)
            urls += url_secrets(provider.base_url)
        return [v.get_secret_value() for v in values if v is not None] + urls


# pydantic's words for a value of the wrong kind ("Input should be a valid boolean, unable
# to interpret input"), said as what to write instead.
_PLAIN = {
    "bool_parsing": "must be true or false",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
}


def _explain(err: ValidationError) -> str:
    """One line per error, named by the variable (a nested location is section/field)."""
    lines = []
    for e in err.errors():
        loc = list(e.get("loc", ()))
        if len(loc) > 1 and loc[0] in Settings.model_fields:
            loc = loc[1:]  # the section is not part of the variable's name
        # The variable in capitals, then the path inside its JSON value as the operator
        # wrote it: PROVIDERS["local"]["models"], not PROVIDERS/LOCAL/MODELS.
        where = str(loc[0]).upper() + "".join(
            f"[{p}]" if isinstance(p, int) else f'["{p}"]' for p in loc[1:]) if loc else ""
        msg = _PLAIN.get(e.get("type", ""), str(e.get("msg", "invalid")))
        if e.get("type") in _PLAIN:
            msg += f", not {e.get('input')!r}"
        msg = msg.removeprefix("Value error, ")
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
            return Settings.model_validate(dict(environ))
        return Settings(_env_file=env_file)  # type: ignore[call-arg]
    except ValidationError as e:
        raise ConfigError(_explain(e)) from None
