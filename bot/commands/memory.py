"""The memory commands, declared for every platform: ``/summary [public]``, ``/reset``,
``/memory``, ``/remember <text>`` and ``/forget <fact id or text>``.

``/summary``, ``/reset`` and ``/memory`` take no text worth refusing: anything after them
is ignored (``/summary`` looks for the single word ``public``). A fact and a fact's
reference are free text in any script, checked only for length and control characters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.arguments import ArgumentError, CommandSpec
from bot.commands.declare import Argument, Command, Context, Permission
from bot.memory_commands.feature import MAX_FACT_CHARS
from bot.messages import CommandResult

__all__ = [
    "COMMANDS",
    "FORGET",
    "MEMORY",
    "ORDER",
    "REMEMBER",
    "RESET",
    "SUMMARY",
    "NoArgs",
    "SummaryArgs",
    "Text",
]


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


async def _run_summary(ctx: Context, args: SummaryArgs) -> CommandResult:
    return await ctx.features.memory_commands.summary(ctx.key, ctx.user_id)


async def _run_reset(ctx: Context, args: NoArgs) -> CommandResult:
    return await ctx.features.memory_commands.reset(
        ctx.key, allowed=await ctx.may(Permission.MODERATE),
        refusal=ctx.refusal(Permission.MODERATE, "reset this channel's memory"))


async def _run_remember(ctx: Context, args: Text) -> CommandResult:
    return await ctx.features.memory_commands.remember(ctx.key, ctx.readable(args.text),
                                      author=await ctx.user_name())


async def _run_memory(ctx: Context, args: NoArgs) -> CommandResult:
    return await ctx.features.memory_commands.memory_list(ctx.key)


async def _run_forget(ctx: Context, args: Text) -> CommandResult:
    return await ctx.features.memory_commands.forget(
        ctx.key, args.text, allowed=await ctx.may(Permission.MODERATE),
        refusal=ctx.refusal(Permission.MODERATE, "make me forget facts of this channel"))


PUBLIC = Argument("public", "Show it to everyone here (default: only you)", "flag")


# ``/summary``, ``/reset``, ``/remember``, ``/memory`` and ``/forget``, in that order
ORDER = 10  # where the registry lists them: first
COMMANDS: tuple[Command[Any], ...] = (
    Command(SUMMARY, "What this channel has talked about, as I remember it", _run_summary,
            (PUBLIC,), answer="only you, unless you add public", waits=True, shows=True),
    Command(RESET, "Forget this channel's conversation", _run_reset,
            permission=Permission.MODERATE, hidden=True),
    Command(REMEMBER, "Pin a fact for this channel", _run_remember,
            (Argument("text", "What to remember", required=True,
                      examples=("the demo is on Thursday",)),)),
    Command(MEMORY, "The facts I keep for this channel (only you see it)", _run_memory,
            shows=True),
    Command(FORGET, "Forget one fact of this channel", _run_forget,
            (Argument("fact", "The fact's id (see /memory) or its text", required=True,
                      examples=("12", "#12", "demo")),),
            permission=Permission.MODERATE, hidden=True, shows=True),
)
