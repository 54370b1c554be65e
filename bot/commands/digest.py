"""``/digest``, declared for every platform; its arguments: ``daily HH:MM [zone]
[thread]``, ``weekly <day> HH:MM [zone] [thread]``, ``off``, ``now`` or nothing (the
schedule in force). The request and its words are the catch-up feature's
(``bot.catchup.digest_request``).
"""

from __future__ import annotations

from bot.catchup.digest_request import DIGEST, USAGE, DigestRequest, read_digest
from bot.commands.declare import Argument, Command, Context, Permission
from bot.messages import CommandResult

__all__ = ["COMMANDS", "DIGEST", "DIGEST_COMMAND", "ORDER", "USAGE", "DigestRequest", "read_digest"]


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
