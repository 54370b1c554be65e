"""The memory commands' arguments: ``/summary [public]``, ``/reset``, ``/memory``,
``/remember <text>`` and ``/forget <fact id or text>``.

``/summary``, ``/reset`` and ``/memory`` take no text worth refusing: anything after them
is ignored (``/summary`` looks for the single word ``public``). A fact and a fact's
reference are free text in any script, checked only for length and control characters.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.commands.args import ArgumentError, CommandSpec
from bot.memory_commands import MAX_FACT_CHARS

__all__ = ["FORGET", "MEMORY", "REMEMBER", "RESET", "SUMMARY", "NoArgs", "SummaryArgs", "Text"]


@dataclass(frozen=True, slots=True)
class NoArgs:
    """A command without arguments."""


@dataclass(frozen=True, slots=True)
class SummaryArgs:
    """``/summary``: whether to answer everyone (the one word ``public``)."""

    public: bool = False


@dataclass(frozen=True, slots=True)
class Text:
    """A command's one free-text argument, stripped and non-empty."""

    text: str


def _summary(text: str) -> SummaryArgs:
    return SummaryArgs(text.strip().lower() == "public")


def _remember(text: str) -> Text:
    if not text.strip():
        raise ArgumentError("Tell me what to remember: /remember <text>.")
    return Text(text.strip())


def _forget(text: str) -> Text:
    if not text.strip():
        raise ArgumentError("Which fact? /forget <id or text> (see /memory).")
    return Text(text.strip())


SUMMARY: CommandSpec[SummaryArgs] = CommandSpec(
    "summary", "[public]", "Usage: /summary [public].", _summary, ignored=True,
    public=lambda a: a.public)
RESET: CommandSpec[NoArgs] = CommandSpec(
    "reset", "", "Usage: /reset.", lambda _text: NoArgs(), ignored=True)
MEMORY: CommandSpec[NoArgs] = CommandSpec(
    "memory", "", "Usage: /memory.", lambda _text: NoArgs(), ignored=True)
REMEMBER: CommandSpec[Text] = CommandSpec(
    "remember", "<text>",
    f"Usage: /remember <text> (a statement of at most {MAX_FACT_CHARS:,} characters).",
    _remember, max_chars=2 * MAX_FACT_CHARS, words=False)  # the service says the exact bound
FORGET: CommandSpec[Text] = CommandSpec(
    "forget", "<fact id or text>", "Usage: /forget <fact id or text> (see /memory).", _forget,
    max_chars=MAX_FACT_CHARS, words=False)
