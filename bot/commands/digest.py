"""``/digest``, declared for every platform; its arguments: ``daily HH:MM [zone]
[thread]``, ``weekly <day> HH:MM [zone] [thread]``, ``off``, ``now`` or nothing (the
schedule in force).

The request is platform- and channel-neutral; ``bot.catchup.digests`` turns a schedule request into
the stored ``DigestSchedule`` (channel, the default zone, who, when).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bot.catchup.since import WEEKDAYS, SinceError, parse_zone
from bot.commands.args import CommandSpec
from bot.commands.declare import Argument, Command, Context, Permission
from bot.messages import CommandResult

__all__ = ["COMMANDS", "DIGEST", "DIGEST_COMMAND", "ORDER", "USAGE", "DigestRequest", "read_digest"]

USAGE = ("Use /digest daily 09:00 [time zone] [thread], /digest weekly mon 09:00 [time zone] "
         "[thread], /digest off or /digest now.")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})$", re.ASCII)
Action = Literal["status", "off", "now", "daily", "weekly"]


@dataclass(frozen=True, slots=True)
class DigestRequest:
    """One ``/digest``: the action and, for a schedule, its slot (``weekday`` -1 for daily,
    ``minute`` of the day), its zone (None: the default) and whether it posts in a thread."""

    action: Action
    weekday: int = -1
    minute: int = 0
    zone: str | None = None
    in_thread: bool = False

    @property
    def public(self) -> bool:
        """``/digest now`` posts the digest for everyone."""
        return self.action == "now"


def read_digest(text: str) -> DigestRequest:
    """The request in ``text``; ``SinceError`` (with the usage) for anything else."""
    words = text.split()
    in_thread = len(words) > 2 and words[-1].lower() == "thread"
    if in_thread:
        words = words[:-1]
    if not words:
        return DigestRequest("status")
    first = words[0].lower()
    if first in ("off", "now", "status") and len(words) == 1:
        return DigestRequest(first)  # type: ignore[arg-type]  # one of the three
    weekday = -1
    rest = words[1:]
    if first == "weekly":
        if not rest:
            raise SinceError(USAGE)
        day = rest[0].lower()
        match = [i for i, name in enumerate(WEEKDAYS) if len(day) >= 3 and name.startswith(day)]
        if not match:
            raise SinceError(f"{rest[0][:40]!r} is not a weekday. " + USAGE)
        weekday, rest = match[0], rest[1:]
    elif first != "daily":
        raise SinceError(USAGE)
    if not rest or not (m := _CLOCK.match(rest[0])):
        raise SinceError("Give the time as HH:MM (24-hour). " + USAGE)
    hour, minute = int(m.group(1)), int(m.group(2))
    if hour > 23 or minute > 59:
        raise SinceError(f"{rest[0]!r} is not a time of day. " + USAGE)
    zone = parse_zone(rest[1]).key if len(rest) > 1 else None
    if len(rest) > 2:
        raise SinceError(USAGE)
    return DigestRequest("weekly" if weekday >= 0 else "daily", weekday, hour * 60 + minute,
                         zone, in_thread)


DIGEST: CommandSpec[DigestRequest] = CommandSpec(
    "digest", "[daily HH:MM | weekly DAY HH:MM] [time zone] [thread] | off | now", USAGE,
    read_digest, public=lambda r: r.public)


async def _run(ctx: Context, args: DigestRequest) -> CommandResult:
    return await ctx.features.catchup_commands.digest(
        await ctx.where(), args, allowed=await ctx.may(Permission.MANAGE_CHANNEL),
        by=ctx.user_id,
        refusal=ctx.refusal(Permission.MANAGE_CHANNEL, "manage this channel's digests"))


DIGEST_COMMAND: Command[DigestRequest] = Command(
    DIGEST, "Scheduled digests of this channel", _run,
    (Argument("schedule",
              "daily 09:00 [zone] [thread] · weekly mon 09:00 [zone] [thread] · off · now",
              examples=("daily 09:00", "daily 09:00 Europe/Berlin thread", "weekly mon 09:00",
                        "off", "now")),),
    permission=Permission.MANAGE_CHANNEL, needed_for="changing the schedule", hidden=True,
    answer="only you; /digest now posts the digest in the channel",
    note="anyone who can read the channel may see the schedule (/digest alone)", waits=True,
    shows=True)

ORDER = 40  # where the registry lists it
COMMANDS = (DIGEST_COMMAND,)
