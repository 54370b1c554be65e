"""``/catchup [since] [time zone] [public]``'s arguments (the words: ``bot.since``)."""

from __future__ import annotations

from bot.commands.args import CommandSpec
from bot.since import ACCEPTED, CatchupArgs, parse_catchup_args

__all__ = ["CATCHUP", "USAGE"]

USAGE = f"Usage: /catchup [since] [time zone] [public]; for since, {ACCEPTED}."

CATCHUP: CommandSpec[CatchupArgs] = CommandSpec(
    "catchup", "[since] [time zone] [public]", USAGE, parse_catchup_args,
    public=lambda a: a.public)
