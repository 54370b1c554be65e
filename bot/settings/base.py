"""What every section of the settings tree shares: the frozen base class, and the checks
several sections run (lists written with commas, placeholders copied from documentation)."""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, SecretStr
from pydantic_settings import NoDecode

__all__ = ["CsvList", "Section", "at_least_one", "blank_is_unset", "endpoint_url",
           "looks_like_placeholder", "real_token", "split_csv"]

# A value copied from documentation rather than a key: a whole word (changeme, todo), or a
# tell anywhere in it: an ellipsis, <angle brackets>, a leading "your", a run of x's set off
# by punctuation (sk-xxx, xoxb-xxxx-xxxx) or six long. Random keys can hold "xxx" between
# letters, so a short run inside a word is not a tell. Non-ASCII is checked apart.
_PLACEHOLDER = re.compile(
    r"^(changeme|replace[-_ ]?me|todo|none|null|api[-_ ]?key)$"
    r"|^your|\.\.\.|…|<.*>|(?:^|[^a-z0-9])x{3,}(?:$|[^a-z0-9])|x{6,}",
    re.IGNORECASE,
)
CsvList = Annotated[list[str], NoDecode]
_TOKEN_PLACEHOLDER = ("looks like a placeholder, not a real token; paste the real one, "
                      "or remove the line")


def looks_like_placeholder(value: str) -> bool:
    """Whether a key or token is a placeholder, not a real one (real ones are plain ASCII)."""
    value = value.strip()
    return not value.isascii() or _PLACEHOLDER.search(value) is not None


def split_csv(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def blank_is_unset(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def real_token(value: SecretStr | None) -> SecretStr | None:
    if value is not None and looks_like_placeholder(value.get_secret_value()):
        raise ValueError(_TOKEN_PLACEHOLDER)
    return value


def at_least_one(value: int, what: str) -> int:
    if value < 1:
        raise ValueError(f"must be at least 1, not {value}: it is how many {what}")
    return value


class Section(BaseModel):
    """A frozen section; unknown names are errors (a misspelt field in code or a test)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def endpoint_url(value: str) -> str:
    """An OpenAI-compatible endpoint's URL, trimmed, or ``ValueError`` saying what one
    looks like (``OPENAI_BASE_URL``, a ``PROVIDERS`` entry's ``base_url``)."""
    parsed = urlparse(value.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError("must be an http(s) URL ending in /v1, such as "
                         "http://localhost:11434/v1 (Ollama) or https://api.openai.com/v1")
    return value.strip().rstrip("/")
