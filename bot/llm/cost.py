"""The largest cost of one model call: what its quota reservation holds until the provider
reports what it used (``bot.channels.quota``).

A chat call costs at most its prompt plus its reply limit (``max_tokens``). The prompt is
counted with the bot's tokenizer (``memory.tokens``: unknown models already over-counted by
a tenth) plus a margin of ``MARGIN`` and ``PER_MESSAGE`` tokens of chat framing per message;
an image part counts as ``IMAGE_TOKENS`` (the tile formula's most for ``high`` detail, an
image of 768×2048) or ``LOW_DETAIL_TOKENS``. Without a tokenizer, each UTF-8 byte counts as
a token, which no byte-level BPE tokenizer exceeds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memory.tokens import Tokenizer

__all__ = ["IMAGE_TOKENS", "LOW_DETAIL_TOKENS", "MARGIN", "PER_MESSAGE", "chat_cost", "text_cost"]

MARGIN = 1.1
PER_MESSAGE = 8
IMAGE_TOKENS = 1445
LOW_DETAIL_TOKENS = 85


def text_cost(texts: Iterable[str], tokenizer: Tokenizer | None) -> int:
    """An upper estimate of the tokens of ``texts`` (embedding inputs, say)."""
    if tokenizer is None:
        return sum(len(t.encode("utf-8")) for t in texts)
    return sum(math.ceil(tokenizer.count(t) * MARGIN) for t in texts)


def chat_cost(messages: Sequence[Mapping[str, Any]], max_tokens: int,
              tokenizer: Tokenizer | None) -> int:
    """An upper estimate of a chat call's total tokens: prompt plus ``max_tokens``."""
    texts: list[str] = []
    images = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content if isinstance(content, list) else ():
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "image_url":
                detail = (part.get("image_url") or {}).get("detail", "auto")
                images += LOW_DETAIL_TOKENS if detail == "low" else IMAGE_TOKENS
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
    framing = PER_MESSAGE * (len(messages) + 1)
    return text_cost(texts, tokenizer) + images + framing + max_tokens
