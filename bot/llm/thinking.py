"""Remove reasoning blocks (``<think>…</think>``, ``<thinking>…</thinking>``) from model output.

Reasoning models on OpenAI-compatible endpoints (DeepSeek-R1, Qwen3, …) often put their
chain of thought inline; users should see only the answer, and a summary must never store
the reasoning. The same rules for a whole text and a stream:

- A complete block, anywhere, is removed (tags are case-insensitive).
- A leading opening tag that never closes is removed with everything after it (the model
  ran out of tokens while thinking); after visible text it is kept, as a mention.
- A stray closing tag is dropped; :func:`strip_think` also drops everything before it
  (some chat templates put the opening ``<think>`` in the prompt). A stream cannot take
  back what it sent, so there only the tag goes.
- Whitespace before the first visible character is dropped.

:class:`ThinkFilter` buffers only a possible partial tag at a chunk's end (``"<thi"``)
and the inside of an open block.
"""

from __future__ import annotations

import re

__all__ = ["ThinkFilter", "strip_think"]

_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_ANY = re.compile(r"</?think(?:ing)?>", re.IGNORECASE)
_TAGS = ("<think>", "<thinking>", "</think>", "</thinking>")


def _partial_tag_len(text: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of some tag."""
    lowered = text[-len("</thinking>") :].lower()
    for size in range(min(len(lowered), len("</thinking>") - 1), 0, -1):
        tail = lowered[-size:]
        if any(tag.startswith(tail) and tag != tail for tag in _TAGS):
            return size
    return 0


class ThinkFilter:
    """Incremental reasoning-block remover: ``feed()`` each chunk, then ``flush()`` once."""

    def __init__(self) -> None:
        self._pending = ""  # undecided text: a possible partial tag, or a block's inside
        self._inside = False
        self._held = ""  # the open block so far (tag included), re-emitted if it never closes
        self._leading = False  # the open block started before any visible text
        self._visible = False  # something other than whitespace was emitted

    def feed(self, chunk: str) -> str:
        """Take the next chunk; return the text that is now certainly visible."""
        self._pending += chunk
        out: list[str] = []
        while True:
            if self._inside:
                close = _CLOSE.search(self._pending)
                if close is None:
                    keep = _partial_tag_len(self._pending)
                    cut = len(self._pending) - keep
                    self._held += self._pending[:cut]
                    self._pending = self._pending[cut:]
                    break
                self._inside, self._held = False, ""
                self._pending = self._pending[close.end() :]
                continue
            tag = _ANY.search(self._pending)
            if tag is None:
                keep = _partial_tag_len(self._pending)
                cut = len(self._pending) - keep
                out.append(self._emit(self._pending[:cut]))
                self._pending = self._pending[cut:]
                break
            out.append(self._emit(self._pending[: tag.start()]))
            self._pending = self._pending[tag.end() :]
            if _OPEN.fullmatch(tag.group()):
                self._inside, self._held, self._leading = True, tag.group(), not self._visible
            # a stray closing tag is simply dropped
        return "".join(out)

    def flush(self) -> str:
        """End of input: return what was still held back (an unclosed non-leading block, a
        partial tag that never completed)."""
        rest = self._pending
        self._pending = ""
        if self._inside:
            self._inside = False
            held, self._held = self._held, ""
            if self._leading:
                return ""
            return self._emit(held + rest)
        return self._emit(rest)

    def _emit(self, text: str) -> str:
        if not self._visible:
            text = text.lstrip()
            self._visible = bool(text)
        return text


def strip_think(text: str) -> str:
    """``text`` without reasoning blocks, stripped of surrounding whitespace."""
    first = _ANY.search(text)
    if first is not None and _CLOSE.fullmatch(first.group()):
        text = text[first.end() :]  # output began mid-reasoning: the opener was in the prompt
    f = ThinkFilter()
    return (f.feed(text) + f.flush()).strip()
