"""``/catchup [since] [time zone] [public]``, declared for every platform (the words:
``bot.catchup.since``; its parser and the work: ``bot.catchup.command``)."""

from __future__ import annotations

from bot.catchup.command import CATCHUP, USAGE
from bot.catchup.since import CatchupArgs
from bot.commands.declare import Argument, Command, Context
from bot.messages import CommandResult

__all__ = ["CATCHUP", "CATCHUP_COMMAND", "COMMANDS", "ORDER", "USAGE"]

async def _run(ctx: Context, args: CatchupArgs) -> CommandResult:
    return await ctx.features.catchup_commands.catchup(await ctx.where(), ctx.user_id, args)


CATCHUP_COMMAND: Command[CatchupArgs] = Command(
    CATCHUP, "What happened here since your last message (only you)", _run,
    (Argument("since", "Where to start (default: your last message here, or 24 hours "
                       "back), then a time zone if you like",
              examples=("2h", "3 days ago", "yesterday", "last friday", "since noon", "3 dec",
                        "2026-03-08 14:30", "yesterday Europe/Berlin", "a message link")),
     Argument("public", "Show it to everyone here (default: only you)", "flag")),
    answer="only you, unless you add public", waits=True, shows=True)

ORDER = 30  # where the registry lists it
COMMANDS = (CATCHUP_COMMAND,)
