"""gistbot's application errors, in one place::

    GistbotError (base: anything the bot raises on purpose)
    ├── ConfigError                a setting is missing or wrong; the message names the fix
    ├── PermissionDenied           the caller may not do this (e.g. ``/reset``)
    ├── PlatformUnreachable        Discord or Slack could not be reached at start
    ├── OutcomeUnknown             a post, edit or delete may have taken effect: look it up
    ├── OverQuota                  refused before it started: a daily token limit is reached
    └── LLMError                   the language model call failed; nothing was stored
        ├── LLMTimeout             no answer within the timeout (after the SDK's retries)
        ├── LLMRateLimited         429 after the SDK's retries; ``retry_after`` if known
        ├── LLMUnavailable         5xx or connection refused/reset (after retries)
        ├── LLMBadResponse         200 but unusable: malformed JSON, no choices, empty text
        ├── ContextLengthExceeded  the prompt is larger than the model's context window
        ├── EndpointNotFound       404 from a base URL without its API version (``/v1``)
        ├── LLMInputRejected       400/413/415/422 otherwise: a part refused (an unreadable image)
        └── LLMAuthError           401/403: the key is wrong or lacks access

Adapters catch ``GistbotError`` at the edge, log it with the stack and show ``user_message``
(no exception text, URL or secret); ``llm_error_from`` maps the ``openai`` SDK's failures.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from memory.errors import CallRefused

__all__ = [
    "OVER_QUOTA",
    "TOO_SMALL",
    "ConfigError",
    "ContextLengthExceeded",
    "EndpointNotFound",
    "GistbotError",
    "LLMAuthError",
    "LLMBadResponse",
    "LLMError",
    "LLMInputRejected",
    "LLMRateLimited",
    "LLMTimeout",
    "LLMUnavailable",
    "ModelNotServed",
    "OutcomeUnknown",
    "OverQuota",
    "PermissionDenied",
    "PlatformUnreachable",
    "is_context_length_error",
    "llm_error_from",
    "user_text",
]


class GistbotError(Exception):
    """Base class of every error the bot raises deliberately."""

    user_message: str = "Sorry, something went wrong on my side. Please try again."


def user_text(error: BaseException) -> str:
    """The friendly sentence for ``error``: its own for a ``GistbotError``, else the
    generic one (never an exception's text)."""
    return error.user_message if isinstance(error, GistbotError) else GistbotError.user_message


class ConfigError(GistbotError):
    """A setting is missing or invalid. The message says which variable and how to fix it."""

    user_message = "I'm not configured correctly; an administrator needs to check my settings."


class PermissionDenied(GistbotError):
    """The caller is not allowed to run this command here."""

    user_message = "Sorry, you don't have permission to do that here."


class PlatformUnreachable(GistbotError):
    """Discord or Slack could not be reached when starting (network, DNS, proxy, outage).

    Only at the first start: once connected, the adapters retry with backoff instead.
    """

    user_message = "I can't reach the chat platform right now."


class OutcomeUnknown(GistbotError):
    """A post, edit or delete was sent, but whether it took effect is unknown: the platform
    answered 5xx, the connection was reset, or no answer came in time.

    An outlet raises it instead of answering "failed", so the caller looks the effect up
    by its outbox identity before doing it again (``bot.conversation.lookup``).
    """


OVER_QUOTA = (
    "You have used {what} daily allowance of tokens ({limit:,}). I still remember what you "
    "write here; I can answer again after 00:00 UTC."
)


TOO_SMALL = (
    "{what} daily allowance of tokens ({limit:,}) is less than one answer needs (about "
    "{needs:,}), so I cannot answer within it; an administrator would need to raise it. I "
    "still remember what you write here."
)


class OverQuota(GistbotError, CallRefused):
    """A model call was refused before it was sent: ``whose`` ("your" or "this server's")
    daily token limit ``limit`` is used up (``bot.channels.quota``), or, with ``needs``,
    is below what the call alone needs (then waiting for tomorrow would not help, and the
    notice says so). ``user_message`` is the notice."""

    def __init__(self, whose: str, limit: int, user_id: str = "", *, needs: int = 0) -> None:
        super().__init__(f"over {whose} daily token limit ({limit})")
        self.whose, self.limit, self.user_id = whose, limit, user_id
        self.user_message = (
            TOO_SMALL.format(what=whose[:1].upper() + whose[1:], limit=limit, needs=needs)
            if needs > limit else OVER_QUOTA.format(what=whose, limit=limit))


class LLMError(GistbotError):
    """A call to the language model failed. Callers keep their old state: a failure
    degrades, never destroys."""

    user_message = "Sorry, I couldn't reach my language model. Please try again."


class LLMTimeout(LLMError):
    """The model did not answer within the configured timeout."""

    user_message = "Sorry, the language model took too long to answer. Please try again."


class LLMRateLimited(LLMError):
    """The provider keeps refusing with 429; ``retry_after`` is its hint in seconds, if any."""

    user_message = "I'm getting too many requests right now. Please try again in a minute."

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLMUnavailable(LLMError):
    """The provider answered 5xx or could not be reached at all."""

    user_message = "The language model is unavailable at the moment. Please try again later."


class LLMBadResponse(LLMError):
    """The provider answered, but not with usable text (bad JSON, no choices, empty)."""

    user_message = "The language model gave me an answer I couldn't use. Please try again."


class ContextLengthExceeded(LLMError):
    """The prompt does not fit the model's context window; shrink ``CONTEXT_TOKENS``."""

    user_message = "That conversation is too long for my language model to read at once."


class EndpointNotFound(LLMError):
    """The server answers 404 for the API: ``OPENAI_BASE_URL`` lacks the ``/v1`` the
    OpenAI-compatible servers (Ollama, vLLM, LM Studio, llama.cpp) serve it under."""

    user_message = (
        "My language model's address is wrong; an administrator needs to check "
        "OPENAI_BASE_URL."
    )


class LLMInputRejected(LLMError):
    """The endpoint refused the request for something in it (HTTP 400, 413, 415 or 422 that
    is not about the context length), such as an image it cannot decode. Sent again
    unchanged it fails again, so a caller that sent images or files retries once without
    them and marks them so they are never sent again."""

    user_message = "The language model refused my request. Please try again in other words."


class ModelNotServed(LLMError):
    """The endpoint answers but does not list ``MODEL_NAME`` (or ``SUMMARY_MODEL_NAME``)."""

    user_message = (
        "My language model is not available on its server; an administrator needs to check "
        "MODEL_NAME."
    )


class LLMAuthError(LLMError):
    """The provider rejected our credentials (401) or access to the model (403)."""

    user_message = "I can't log in to my language model; an administrator needs to check the key."


# How providers say "prompt too long": OpenAI, Groq, DeepSeek and older vLLM ("maximum
# context length is N tokens"); newer vLLM ("longer than the maximum model length");
# llama.cpp ("exceeds the available context size", type exceed_context_size_error); Ollama
# ("exceeds the context length"); Mistral and LM Studio ("… context length");
# Anthropic-compatible ("prompt is too long"); TGI ("`inputs` tokens + `max_new_tokens`").
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_CONTEXT_TEXT = re.compile(
    r"context[ _-]?(?:length|window|size)|maximum model length|prompt is too long"
    r"|reduce the length of the messages|inputs.{0,2} tokens \+ .{0,2}max_new_tokens",
    re.IGNORECASE,
)


def is_context_length_error(code: object, message: str) -> bool:
    """Whether a provider's error code or message says the prompt exceeds the context."""
    return str(code) in _CONTEXT_CODES or bool(_CONTEXT_TEXT.search(message))


# An API version in the base URL's path: /v1, /api/v1, /v1beta/openai, /openai/v1.
_VERSIONED = re.compile(r"://[^/]+/(?:.*/)?v\d+[a-z0-9]*(?:/|$)", re.IGNORECASE)


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return float((headers or {}).get(name, "")) / scale
        except ValueError:
            continue
    return None


def _endpoint(exc: Exception) -> str:
    """The base URL a failed request went to (no credentials, query or API path)."""
    from urllib.parse import urlsplit

    request = getattr(exc, "request", None)
    try:
        url = urlsplit(str(request.url))  # type: ignore[union-attr]
    except Exception:
        return "(unknown URL)"
    path = url.path
    for api in ("/chat/completions", "/completions", "/models", "/embeddings"):
        if path.endswith(api):
            path = path[: -len(api)]
            break
    host = url.hostname or ""
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{host}{port}{path}"


def llm_error_from(exc: Exception) -> LLMError:
    """The class above for an ``openai`` SDK exception that survived the SDK's retries.

    Lives here so the whole error policy reads in one file. The message is for logs.
    """
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeout("the model endpoint did not answer in time")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        why = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
        return LLMUnavailable(
            f"cannot reach the model endpoint {_endpoint(exc)} ({why}): check OPENAI_BASE_URL "
            "and that the server is running; `gistbot doctor` tests the connection"
        )
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        return LLMBadResponse(f"unusable response from the model endpoint: {exc}")
    if not isinstance(exc, openai.APIError):
        return LLMError(f"model call failed: {exc!r}")
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    detail = f"HTTP {status}: {exc.message}" if status else exc.message
    body = exc.body if isinstance(exc.body, dict) else {}
    if status in (401, 403):
        return LLMAuthError(
            f"the model endpoint rejected the credentials ({detail}): check OPENAI_API_KEY "
            "and MODEL_NAME; `gistbot doctor` tests them"
        )
    if isinstance(exc, openai.APIStatusError) and status == 429:
        retry_after = _retry_after(exc.response.headers)
        return LLMRateLimited(f"rate limited ({detail})", retry_after=retry_after)
    message = f"{exc.message} {body}"
    if any(is_context_length_error(c, message) for c in (exc.code, body.get("type"))):
        return ContextLengthExceeded(f"the prompt exceeds the model's context ({detail})")
    if status is None or status >= 500:
        return LLMUnavailable(f"the model endpoint failed ({detail})")
    base = _endpoint(exc)
    if status == 404 and base.startswith(("http://", "https://")) and not _VERSIONED.search(base):
        return EndpointNotFound(
            f"the model endpoint {base} answers HTTP 404 (not found): OpenAI-compatible "
            f"servers serve the API under /v1, so add it: OPENAI_BASE_URL={base}/v1"
        )
    if status in (400, 413, 415, 422):
        return LLMInputRejected(f"the model endpoint rejected the request's input ({detail})")
    return LLMError(f"the model endpoint refused the request ({detail})")
