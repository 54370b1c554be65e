"""``/help [command]``, generated from the registry the platform runs: every command with
one line, or one command's usage, arguments with examples, who may run it and who sees the
answer. Nothing here reaches the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.arguments import ArgumentError, CommandSpec
from bot.commands.declare import Argument, Command, Context, Permission, Registry
from bot.messages import CommandResult

__all__ = ["COMMANDS", "HELP", "HELP_COMMAND", "ORDER", "HelpArgs", "describe", "listing"]

USAGE = "Usage: /help [command]."


@dataclass(frozen=True, slots=True)
class HelpArgs:
    """The command asked about, without its slash ("" for all of them)."""

    name: str = ""


def _grammar(text: str) -> HelpArgs:
    words = text.split()
    if len(words) > 1:
        raise ArgumentError(f"Ask about one command at a time. {USAGE}")
    return HelpArgs(words[0].removeprefix("/").lower() if words else "")


HELP: CommandSpec[HelpArgs] = CommandSpec("help", "[command]", USAGE, _grammar, max_chars=100)


def listing(commands: Registry) -> str:
    """Every command, one line each."""
    lines = [f"{c.usage} — {c.description}" for c in commands]
    return "\n".join(["Commands:", *lines,
                      "Say /help <command> for its arguments and who may run it."])


def _argument(arg: Argument) -> str:
    line = f"• {arg.name}{' (required)' if arg.required else ''}: {arg.description}"
    if arg.choices:
        line += f"; one of {', '.join(arg.choices)}"
    if arg.examples:
        line += f"; e.g. {', '.join(arg.examples[:6])}"
    return line


def describe(command: Command[Any], ctx: Context) -> str:
    """One command: usage, description, arguments with examples, who may run it (in the
    platform's words) and who sees the answer."""
    lines = [f"Usage: {command.usage}", command.description + "."]
    if command.arguments:
        lines += ["Arguments:", *(_argument(a) for a in command.arguments)]
    who = ctx.who(command.permission)
    if command.permission is not Permission.EVERYONE and command.needed_for:
        who = f"anyone; {command.needed_for}: {who}"
    if command.note:
        who += "; " + command.note.format(**{p.value: ctx.who(p) for p in Permission})
    lines += [f"Who may run it: {who}.", f"Who sees the answer: {command.answer}."]
    return "\n".join(lines)


async def _run(ctx: Context, args: HelpArgs) -> CommandResult:
    if not args.name:
        return CommandResult(listing(ctx.commands))
    command = ctx.commands.get(args.name)
    if command is None:
        names = ", ".join(f"/{n}" for n in ctx.commands.names())
        return CommandResult(f"I don't know /{args.name[:40]}. The commands: {names}.", ok=False)
    return CommandResult(describe(command, ctx))


def _names(features: object, commands: Registry, options: object) -> list[str]:
    return commands.names()


HELP_COMMAND: Command[HelpArgs] = Command(
    HELP, "The commands, or one command's arguments and who may run it", _run,
    (Argument("command", "Which command (default: all of them)", suggest=_names,
              examples=("catchup", "config")),))

ORDER = 90  # where the registry lists it
COMMANDS = (HELP_COMMAND,)
