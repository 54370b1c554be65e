"""The argument layer every command goes through: ``CommandSpec.parse(text)`` returns the
command's typed arguments or a ``Usage`` — the sentence to answer instead — and never
raises.

Before a command's own grammar runs, ``parse`` refuses what no grammar should see: text
over the command's length limit, control characters (tab and line breaks aside) and lone
surrogates, and, for commands whose arguments are words, numbers, times and names,
digits other than 0-9 (``９:００`` is not read as ``9:00``). A grammar raises
``ArgumentError`` with a message for the user (``bot.catchup.since.SinceError`` is one) or returns
a ``Usage``; anything else it raises is a defect, logged as a warning (with its stack) and
answered with the usage sentence, so bad input never becomes an error for the person who
typed it.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["ArgumentError", "CommandSpec", "Usage", "unreadable"]

log = logging.getLogger(__name__)
A = TypeVar("A")
_ALLOWED_CONTROLS = frozenset("\t\n\r")


class ArgumentError(ValueError):
    """Arguments a grammar can't read; the message is for the user and says what to type."""


@dataclass(frozen=True, slots=True)
class Usage:
    """The answer to arguments a command can't read: what is wrong and how to type it."""

    text: str


def unreadable(text: str, *, words: bool) -> str | None:
    """Why ``text`` can't be an argument (control characters, lone surrogates, with
    ``words`` also non-ASCII digits), or None when it can."""
    for ch in text:
        category = unicodedata.category(ch)
        if category == "Cc" and ch not in _ALLOWED_CONTROLS:
            return "It contains control characters."
        if category == "Cs":
            return "It contains characters that are not text."
        if words and category == "Nd" and not ch.isascii():
            return "Write numbers with the digits 0-9."
    return None


@dataclass(frozen=True, slots=True)
class CommandSpec(Generic[A]):
    """One command: its name, its arguments as shown to people, its usage sentence and its
    grammar (text → arguments; ``ArgumentError`` or ``Usage`` for what it can't read).

    ``words``: the arguments are words (times, zones, keys), so only ASCII digits are read;
    free text (a fact to remember) may use any. ``ignored``: the command takes no text
    worth refusing (``/reset``): whatever follows is passed to the grammar unchecked.
    ``public`` says whether parsed arguments ask for an answer everyone sees.
    """

    name: str
    arguments: str
    usage: str
    grammar: Callable[[str], A | Usage]
    max_chars: int = 200
    words: bool = True
    ignored: bool = False
    public: Callable[[A], bool] = lambda _args: False

    def check(self, text: str) -> Usage | None:
        """The ``Usage`` for text no grammar of this command should see, or None."""
        if len(text) > self.max_chars:
            return Usage(f"That is too long for /{self.name} (at most {self.max_chars:,} "
                         f"characters). {self.usage}")
        why = unreadable(text, words=self.words)
        return None if why is None else Usage(f"I can't read that. {why} {self.usage}")

    def parse(self, text: str | None) -> A | Usage:
        """The arguments in ``text`` (what follows the command), or the ``Usage`` to answer."""
        raw = text or ""
        try:
            if self.ignored:
                return self.grammar(raw[: self.max_chars])
            refused = self.check(raw)
            return refused if refused is not None else self.grammar(raw)
        except ArgumentError as e:
            return Usage(str(e) or self.usage)
        except Exception:  # a grammar's defect must not become the user's problem
            log.warning("/%s could not read its arguments", self.name, exc_info=True)
            return Usage(f"I can't read that. {self.usage}")
