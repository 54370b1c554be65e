"""``/aboutme``, ``/aboutme remember <text>`` and ``/aboutme forget <number|all>``, declared
once for every platform; the answer is the caller's alone (Slack: ephemeral; Discord: only
you; the console's operator). Not ``/me``: Slack reserves it and refuses a manifest naming it.

The grammar reads the first word: nothing (or ``list``) lists, ``remember`` keeps the rest,
``forget`` takes a note's number (``#2`` too) or ``all``. A note is free text in any script,
checked for length and control characters like ``/remember``'s facts.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.arguments import ArgumentError, CommandSpec, Usage
from bot.commands.declare import Argument, Command, Context
from bot.features.notes.feature import MAX_NOTE_CHARS, Notes
from bot.features.notes.wording import (
    USAGE,
)
from bot.messages import CommandResult

__all__ = ["COMMANDS", "ME", "MeArgs", "parse_me"]


@dataclass(frozen=True, slots=True)
class MeArgs:
    """What ``/aboutme`` was asked: ``list``, ``remember`` (``text``) or ``forget`` (``number``;
    None: all)."""

    action: str = "list"
    text: str = ""
    number: int | None = None


def parse_me(text: str) -> MeArgs:
    """``/aboutme``'s arguments (``ArgumentError`` with the usage for anything else)."""
    word, _, rest = text.strip().partition(" ")
    word, rest = word.lower(), rest.strip()
    if word in ("", "list") and not rest:
        return MeArgs()
    if word == "remember":
        if not _visible(rest):
            raise ArgumentError("Tell me what to keep: /aboutme remember <text>.")
        return MeArgs("remember", rest)
    if word == "forget":
        ref = rest.lower().removeprefix("#")
        if ref == "all":
            return MeArgs("forget")
        if ref.isascii() and ref.isdigit() and len(ref) <= 6:
            return MeArgs("forget", number=int(ref))
        raise ArgumentError("Which note? /aboutme forget <number|all> (see /aboutme).")
    raise ArgumentError(USAGE)


def _visible(text: str) -> bool:
    """Whether ``text`` has a character a person sees: a note of only zero-width or format
    characters (U+200B, U+2060, U+FEFF …) and spaces would be kept and listed as a blank."""
    return any(not c.isspace() and unicodedata.category(c) != "Cf" for c in text)


# The text's bound is far past a note's: the feature says the one bound a note has, so a
# long note is never told a larger one here and then refused at the smaller.
ME: CommandSpec[MeArgs] = CommandSpec(
    "aboutme", "[remember <text> | forget <number|all>]", USAGE, parse_me,
    max_chars=20 * MAX_NOTE_CHARS, words=False)


def _from_options(options: Mapping[str, Any]) -> MeArgs | Usage:
    """Discord's options: a text without an action (or with the default, ``list``) is a
    note to keep, unless it starts with an action itself (``forget 2``: as typed elsewhere)."""
    action = str(options.get("action") or "").strip().lower()
    text = str(options.get("text") or "").strip()
    if text and action in ("", "list"):
        if text.split(maxsplit=1)[0].lower() in ("remember", "forget"):
            return ME.parse(text)
        action = "remember"
    return ME.parse(f"{action} {text}".strip())


async def _run(ctx: Context, args: MeArgs) -> CommandResult:
    notes = ctx.features.running.of(Notes)
    if args.action == "remember":
        return await notes.remember(ctx.key, ctx.user_id, ctx.readable(args.text))
    if args.action == "forget":
        return await notes.forget(ctx.key, ctx.user_id, args.number)
    return await notes.listing(ctx.key, ctx.user_id)


COMMANDS: tuple[Command[Any], ...] = (
    Command(ME, "Notes about you that I use when you ask me something (only you see them)",
            _run,
            (Argument("action", "list (default), remember or forget", "choice",
                      choices=("list", "remember", "forget"),
                      examples=("remember I prefer short answers", "forget 2", "forget all")),
             Argument("text", "The note (remember) or its number or all (forget)")),
            from_options=_from_options),
)
