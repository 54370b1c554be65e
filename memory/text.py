"""Make any incoming text safe to store and count.

Platforms deliver text that SQLite's UTF-8 codec or a JSON encoder chokes on: lone UTF-16
surrogates (from mangled emoji) and NUL bytes. We keep the message (never drop a turn) and
replace only the unencodable code points with U+FFFD, so what was said stays readable.
"""

from __future__ import annotations

__all__ = ["clean_text", "defuse"]

_REPLACEMENT = "\ufffd"


def clean_text(text: str) -> str:
    """Return ``text`` with NULs and unpaired surrogates replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", _REPLACEMENT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A valid surrogate *pair* written as two code points is joined; a lone one is replaced.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def defuse(text: str) -> str:
    """Neutralise the prompt's fence markers so remembered text cannot close or reopen the
    memory fence (``bot.conversation.prompts``); views count text in this form."""
    return text.replace("<<<", "‹‹‹").replace(">>>", "›››")
