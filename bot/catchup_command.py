"""``/catchup [since] [zone] [public]``: which period, then ``bot.catchup`` for the points.

The period ends now. It starts at ``since`` (``bot.since``) or, by default, just after the
caller's own last message in the channel or its threads — Discord and Slack do not tell a
bot what someone has read, so a person's last post is the best "where they left off" — or
24 hours back when they never posted there.

Adapters hand a ``Where``: the channel, its threads (Discord) and how to link a message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from bot.catchup import Catchup, CatchupResult, Period, Scope
from bot.catchup_text import when
from bot.citations import Linker, plain_links
from bot.commands.args import Usage
from bot.commands.catchup import CATCHUP
from bot.messages import CommandResult
from bot.since import CatchupArgs, Since, SinceError, read_since, start_of, time_of_link
from memory.catchup_store import CatchupStore
from memory.models import ChannelKey

__all__ = ["DEFAULT_HOURS", "Catchups", "Where"]

DEFAULT_HOURS = 24


@dataclass(frozen=True, slots=True)
class Where:
    """A channel as an adapter sees it: its key, its threads (key → name), its links."""

    key: ChannelKey
    threads: Mapping[ChannelKey, str] = field(default_factory=dict)
    linker: Linker = plain_links

    @property
    def scope(self) -> Scope:
        """The catch-up scope: the channel and its threads."""
        return Scope(self.key, self.threads)


class Catchups:
    """Runs ``/catchup`` for the service (one per process)."""

    def __init__(self, engine: Catchup, store: CatchupStore, zone: ZoneInfo, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.engine, self.store, self.zone, self.clock = engine, store, zone, clock

    async def period(self, where: Where, author_id: str, since: str, zone: ZoneInfo, *,
                     read: Since | None = None) -> Period:
        """The period ``since`` (``read`` already, or read here) names, or the default (see
        the module docstring); ``SinceError`` when it is in the future."""
        now = self.clock()
        if since:
            start = start_of(read or read_since(since), since, now=now, zone=zone)
            label = "since that message" if time_of_link(since) is not None else f"since {since}"
            return Period(start, now, label)
        last = None
        for key in (where.key, *where.threads):
            turn = await self.store.last_turn_by(key, author_id, now)
            if turn is not None and (last is None or turn.sent_at > last):
                last = turn.sent_at
        if last is None:
            return Period(now - DEFAULT_HOURS * 3600, now, f"last {DEFAULT_HOURS} hours")
        return Period(last + 0.001, now, f"since your last message ({when(last, zone)})")

    async def command(self, where: Where, author_id: str,
                      args: str | CatchupArgs) -> CommandResult:
        """``/catchup`` for ``author_id`` in ``where`` with the command's text (or the
        arguments ``bot.commands.catchup`` read from it)."""
        if isinstance(args, str):
            parsed = CATCHUP.parse(args)
            if isinstance(parsed, Usage):
                return CommandResult(parsed.text, ok=False)
            args = parsed
        zone = args.zone or self.zone
        try:
            period = await self.period(where, author_id, args.since, zone, read=args.start)
        except SinceError as e:
            return CommandResult(str(e), ok=False)
        result = await self.run(where, period, zone)
        return CommandResult(result.text)

    async def run(self, where: Where, period: Period, zone: ZoneInfo, *,
                  title: str = "Catch-up") -> CatchupResult:
        """The catch-up of ``where`` over ``period`` (digests use it too)."""
        return await self.engine.run(where.scope, period, where.linker, zone=zone, title=title)
