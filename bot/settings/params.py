"""Model parameters: the request fields an operator (``MODEL_PARAMS``) or a channel
(``/config set params``) adds to a reply request, such as ``temperature``, ``top_p`` or a
server's own field (``chat_template_kwargs``, ``repetition_penalty``).

``parse_params`` reads them from JSON and refuses the fields gistbot sets itself (the
messages, the model, streaming, the token limit) or whose answers it cannot read (tools,
audio, several choices). ``split_params`` divides the rest for the ``openai`` SDK: the
fields ``chat.completions.create`` names go as named arguments (the SDK checks and
serialises them), any other field is merged into the body through ``extra_body``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["NAMED", "NUMERIC", "RESERVED", "SET_BY_GISTBOT", "UNREADABLE", "merged",
           "parse_params", "split_params"]

# Set by the client on every request.
SET_BY_GISTBOT = frozenset({
    "messages", "model", "stream", "stream_options", "max_tokens", "max_completion_tokens",
})
# Turning the answer into something that is not one text (tool calls, audio, several
# choices), which gistbot could not read.
UNREADABLE = frozenset({
    "n", "tools", "tool_choice", "functions", "function_call", "parallel_tool_calls",
    "audio", "modalities",
})
RESERVED = SET_BY_GISTBOT | UNREADABLE
# Fields of the SDK's ``chat.completions.create`` that may be passed as named arguments.
NAMED = frozenset({
    "temperature", "top_p", "frequency_penalty", "presence_penalty", "seed", "stop",
    "logit_bias", "logprobs", "top_logprobs", "reasoning_effort", "verbosity",
    "service_tier", "user", "metadata", "store", "response_format", "prediction",
    "prompt_cache_key", "safety_identifier", "web_search_options",
})
# Sampling fields that are numbers on every server: a word here would make each reply fail
# with a 400, so it is refused where it is set.
NUMERIC = frozenset({
    "temperature", "top_p", "frequency_penalty", "presence_penalty", "seed", "top_k",
    "min_p", "repetition_penalty", "repeat_penalty",
})


def parse_params(text: str | Mapping[str, Any], *, allowed: Iterable[str] | None = None
                 ) -> dict[str, Any]:
    """The parameters in ``text`` (a JSON object, or an already parsed mapping); raises
    ``ValueError`` saying what is wrong. ``allowed`` limits the keys (a channel's choice)."""
    if isinstance(text, str):
        if not text.strip():
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"is not JSON ({e.msg} at character {e.pos}); write an object such as "
                '{"temperature": 0.7, "top_p": 0.9}'
            ) from None
    else:
        value = text
    if not isinstance(value, Mapping):
        raise ValueError(
            f"must be a JSON object such as {{\"temperature\": 0.7}}, not {type(value).__name__}"
        )
    params = {str(k): v for k, v in value.items()}
    ours = sorted(k for k in params if k in SET_BY_GISTBOT)
    if ours:
        raise ValueError(
            f"sets {', '.join(ours)}, which gistbot sets itself (the messages, model, "
            "streaming and REPLY_TOKENS); remove them"
        )
    unreadable = sorted(k for k in params if k in UNREADABLE)
    if unreadable:
        raise ValueError(
            f"sets {', '.join(unreadable)}, which would make the answer something other than "
            "one text (several choices, tool calls or audio) that gistbot cannot read; "
            "remove them"
        )
    words = sorted(k for k, v in params.items()
                   if k in NUMERIC and (isinstance(v, bool) or not isinstance(v, int | float)))
    if words:
        raise ValueError(f"{', '.join(words)} must be a number, such as 0.7")
    if allowed is not None:
        wanted = set(allowed)
        refused = sorted(k for k in params if k not in wanted)
        if refused:
            may = ", ".join(sorted(wanted)) or "none"
            raise ValueError(f"may not set {', '.join(refused)} here; allowed: {may}")
    return params


def merged(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Later layers over earlier ones, key by key (a channel's over the operator's)."""
    out: dict[str, Any] = {}
    for layer in layers:
        out.update(layer or {})
    return out


def split_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(named arguments of ``create``, fields for ``extra_body``)."""
    named = {k: v for k, v in params.items() if k in NAMED}
    return named, {k: v for k, v in params.items() if k not in NAMED}
