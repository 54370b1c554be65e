"""Split long outgoing text into platform-sized messages, keeping code blocks intact.

Platform-neutral (Discord uses it at 2,000 characters; Slack can at its own limit). A split
prefers, in order: a paragraph break (a blank line, or just before/after a code block), a
line break, a word boundary (whitespace or CJK sentence punctuation), and only then cuts
mid-word. Lengths are counted in code points, which is how Discord counts.

Code fences: a *fence line* is a line that starts with up to three spaces and then three
backticks; every fence line opens or closes a block (the way chat clients render them).
When a split falls inside a block, the chunk is closed with a fence line of three
backticks and the next chunk reopens it with the same language tag (at most 20 characters
of ``[A-Za-z0-9_+#.-]``; anything else on the fence line is not repeated), so every
chunk has balanced fences. The chunks' bodies, joined, are exactly the input text; only
those fence lines are added.

Not handled: backtick fences that do not start a line (``a ```b``` c``) are treated as
ordinary text, and a run of many backticks in mid-line may leave no good place to cut.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

__all__ = ["MIN_LIMIT", "Chunk", "split_message", "split_parts"]

MIN_LIMIT = 64
_FENCE = "```"
_FENCE_LINE = re.compile(r"^ {0,3}```(.*)$", re.MULTILINE)
_FENCE_AT = re.compile(r" {0,3}```")
_LANG = re.compile(r"[A-Za-z0-9_+#.\-]{1,20}")
_CLOSER_MAX = len("\n" + _FENCE)
_WORD_ENDS = frozenset(" \t。！？、，．；：")
_MIN_FILL = 3  # a preferred boundary must leave the chunk at least 1/3 full


@dataclass(frozen=True, slots=True)
class Chunk:
    """One outgoing message: ``opener`` and ``closer`` are added fence lines (or empty);
    ``body`` is the exact slice of the input this chunk carries."""

    opener: str
    body: str
    closer: str

    @property
    def text(self) -> str:
        """The message to send (surrounding blank lines dropped; platforms trim them)."""
        return (self.opener + self.body + self.closer).strip("\n")


class _Fences:
    """Where the fence lines of ``text`` start, how long their ````` prefix is, and the
    language tag of each (kept for reopening)."""

    def __init__(self, text: str) -> None:
        self.starts: list[int] = []
        self.prefix_ends: list[int] = []
        self.line_ends: list[int] = []
        self.langs: list[str] = []
        for m in _FENCE_LINE.finditer(text):
            self.starts.append(m.start())
            self.prefix_ends.append(m.start(1))
            self.line_ends.append(m.end())
            info = m.group(1).strip()
            self.langs.append(info if _LANG.fullmatch(info) else "")

    def open_at(self, pos: int) -> bool:
        """Whether position ``pos`` lies inside a code block (a fence starting at ``pos``
        belongs to what follows)."""
        return bisect_left(self.starts, pos) % 2 == 1

    def opener_at(self, pos: int) -> str:
        """The fence line that reopens the block ``pos`` is in, or ``""``."""
        i = bisect_left(self.starts, pos)
        return f"{_FENCE}{self.langs[i - 1]}\n" if i % 2 == 1 else ""

    def inside_prefix(self, pos: int) -> bool:
        """Whether ``pos`` would cut a fence line's leading backticks apart."""
        i = bisect_right(self.starts, pos) - 1
        return i >= 0 and self.starts[i] < pos < self.prefix_ends[i]


class _Splitter:
    def __init__(self, text: str, limit: int) -> None:
        self.text = text
        self.limit = limit
        self.fences = _Fences(text)

    def valid(self, p: int) -> bool:
        """A cut at ``p`` must not split a fence's backticks, nor start the next chunk with
        backticks that would read as a fence though they are mid-line in the input."""
        if p >= len(self.text):
            return True
        if self.fences.inside_prefix(p):
            return False
        return self.text[p - 1] == "\n" or _FENCE_AT.match(self.text, p) is None

    def chunks(self) -> list[Chunk]:
        text, fences, out, pos = self.text, self.fences, [], 0
        while pos < len(text):
            opener = fences.opener_at(pos)
            room = self.limit - len(opener)
            rest_closer = _CLOSER_MAX if fences.open_at(len(text)) else 0
            if len(text) - pos <= room - rest_closer:
                end = len(text)
            else:
                end = self.cut(pos, pos + room - _CLOSER_MAX)
            body = text[pos:end]
            closer = ""
            if fences.open_at(end):
                closer = _FENCE if body.endswith("\n") else "\n" + _FENCE
            out.append(Chunk(opener, body, closer))
            pos = end
        return out

    def cut(self, pos: int, hi: int) -> int:
        """The best cut in ``(pos, hi]``."""
        lo = pos + max(1, (hi - pos) // _MIN_FILL)
        for finder in (self.paragraph, self.line, self.word):
            p = finder(pos, hi)
            if p >= lo:
                return p
        for finder in (self.line, self.word):
            p = finder(pos, hi)
            if p > pos:
                return p
        for p in range(hi, pos, -1):
            if self.valid(p):
                return p
        return hi  # pathological backtick runs: cut anyway (length beats fence balance)

    def _last(self, needle: str, pos: int, hi: int) -> int:
        """The last cut right after ``needle`` that is in ``(pos, hi]`` and valid, or -1."""
        end = hi
        while True:
            i = self.text.rfind(needle, pos, end)
            if i < 0:
                return -1
            p = i + len(needle)
            if pos < p <= hi and self.valid(p):
                return p
            end = i + len(needle) - 1

    def paragraph(self, pos: int, hi: int) -> int:
        best = self._last("\n\n", pos, hi)
        f = self.fences
        # Just before an opening fence line, or just after a closing one.
        i = bisect_right(f.starts, hi) - 1
        while i >= 0 and f.starts[i] > pos:
            p = f.starts[i] if i % 2 == 0 else f.line_ends[i] + 1
            if best < p <= hi and self.valid(p):
                best = p
            i -= 1
        return best

    def line(self, pos: int, hi: int) -> int:
        return self._last("\n", pos, hi)

    def word(self, pos: int, hi: int) -> int:
        for p in range(hi, pos, -1):
            if self.text[p - 1] in _WORD_ENDS and self.valid(p):
                return p
        return -1


def split_parts(text: str, limit: int) -> list[Chunk]:
    """Split ``text`` into chunks whose ``text`` is at most ``limit`` characters.

    Joining the bodies gives back ``text`` exactly, so a chunk can be blank (only when
    ``text`` has a run of whitespace longer than ``limit``, or is blank). Raises
    ``ValueError`` for a ``limit`` below ``MIN_LIMIT`` (no room for fence lines).
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT}, got {limit}")
    return _Splitter(text, limit).chunks()


def split_message(text: str, limit: int) -> list[str]:
    """The messages to send for ``text``, each at most ``limit`` characters, code fences
    closed and reopened across them; ``[]`` for blank text."""
    return [c.text for c in split_parts(text, limit) if c.text.strip()]
