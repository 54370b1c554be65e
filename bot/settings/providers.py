"""The settings of request parameters and of model endpoints besides the default one
(``bot.settings.params``, ``bot.llm.providers``; docs/providers.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from bot.settings.base import (
    CsvList,
    Section,
    blank_is_unset,
    endpoint_url,
    looks_like_placeholder,
    split_csv,
)
from bot.settings.params import parse_params

__all__ = ["Provider", "ProviderSettings"]


class Provider(Section):
    """One named model endpoint of ``PROVIDERS``: where it is, its key, what it serves."""

    base_url: str = Field(description="The endpoint, ending in /v1.")
    api_key: SecretStr | None = Field(default=None, description=(
        "Its key; unset for servers that need none (Ollama, LM Studio, llama.cpp)."))
    models: list[str] = Field(min_length=1, description=(
        "The models it serves; a channel whose model is one of them is answered here."))
    concurrency: int | None = Field(default=None, ge=1, description=(
        "Its parallel slots. Unset: LLM_CONCURRENCY."))

    _blank = field_validator("api_key", mode="before")(blank_is_unset)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        return endpoint_url(v)

    @field_validator("api_key")
    @classmethod
    def _key(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and looks_like_placeholder(v.get_secret_value()):
            raise ValueError("looks like a placeholder, not a real key; put the real key, "
                             "or leave api_key out for a server that needs none")
        return v

    @field_validator("models")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        names = [m.strip() for m in v]
        if not all(names):
            raise ValueError("a model name is empty")
        return names


def _json_object(value: Any) -> Any:
    """A JSON object given as text (an environment variable) parsed; anything else as is."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return {}
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise ValueError(f"is not JSON ({e.msg} at character {e.pos}); write a JSON object, "
                         'such as {"local": {"base_url": "http://localhost:11434/v1", '
                         '"models": ["llama3.1"]}}') from None


def _request_fields(value: Any) -> Any:
    return parse_params(value if isinstance(value, str | Mapping) else json.dumps(value))


class ProviderSettings(Section):
    """Request parameters of the model calls, and model endpoints besides the default one
    (``bot.settings.params``, ``bot.llm.providers``; docs/providers.md)."""

    model_config = ConfigDict(title="Model parameters and providers")

    model_params: Annotated[dict[str, Any], NoDecode] = Field(default={}, description=(
        'JSON object of fields added to every reply request, e.g. {"temperature": 0.7, '
        '"top_p": 0.9} or a server\'s own field such as {"repetition_penalty": 1.1}. Fields '
        "gistbot sets itself (messages, model, stream, max_tokens …) are refused. Summaries "
        "do not get them (see SUMMARY_MODEL_PARAMS)."))
    summary_model_params: Annotated[dict[str, Any], NoDecode] = Field(default={}, description=(
        "JSON object of fields added to summary and /summary requests (e.g. "
        '{"chat_template_kwargs": {"enable_thinking": false}}). Unset: none, so a creative '
        "MODEL_PARAMS temperature never loosens what summaries keep."))
    model_params_allowed: CsvList = Field(default=["temperature", "top_p"], description=(
        "Comma-separated fields a channel or server may set over MODEL_PARAMS with /config "
        "set params (empty: none)."))
    providers: Annotated[dict[str, Provider], NoDecode] = Field(default={}, description=(
        'JSON object of named endpoints, e.g. {"local": {"base_url": '
        '"http://localhost:11434/v1", "models": ["llama3.1"]}, "hosted": {"base_url": '
        '"https://api.openai.com/v1", "api_key": "sk-…", "models": ["gpt-4o"]}}. A '
        "channel whose model (MODEL_NAME, or its /config model) is listed is answered by that "
        "endpoint with its key; other models by OPENAI_BASE_URL / OPENAI_API_KEY. Their "
        "models may be chosen with /config when ALLOWED_MODELS is unset."))

    _params = field_validator("model_params", "summary_model_params",
                              mode="before")(_request_fields)
    _csv = field_validator("model_params_allowed", mode="before")(split_csv)
    _object = field_validator("providers", mode="before")(_json_object)

    @field_validator("providers")
    @classmethod
    def _distinct(cls, v: dict[str, Provider]) -> dict[str, Provider]:
        seen: dict[str, str] = {}
        for name, provider in v.items():
            if not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", name):
                raise ValueError(f"provider name {name!r}: use letters, digits, . _ or -")
            for model in provider.models:
                if model in seen:
                    raise ValueError(f"model {model!r} is listed by both {seen[model]!r} and "
                                     f"{name!r}; list each model under one provider")
                seen[model] = name
        return v

    def provider_of(self, model: str) -> str | None:
        """The name of the provider that serves ``model`` (None: the default endpoint)."""
        return next((n for n, p in self.providers.items() if model in p.models), None)
