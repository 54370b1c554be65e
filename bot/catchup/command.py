"""``/catchup [since] [zone] [public]``: which period, then ``bot.catchup.gather`` for the points.

The period ends now. It starts at ``since`` (``bot.catchup.since``) or, by default, just after the
caller's own last message in the channel or its threads — Discord and Slack do not tell a
bot what someone has read, so a person's last post is the best "where they left off" — or
24 hours back when they never posted there.

Adapters hand a ``Where``: the channel, its threads (Discord; which are private), how to
link a message and, for a command, what the person asking may read. Only what
``bot.catchup.visibility`` lets the answer's audience read is gathered.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from zoneinfo import ZoneInfo

from bot.arguments import CommandSpec, Usage
from bot.catchup.citations import Linker, plain_links
from bot.catchup.gather import Catchup, CatchupResult, Period, Scope
from bot.catchup.since import (
    ACCEPTED,
    CatchupArgs,
    Since,
    SinceError,
    parse_catchup_args,
    read_since,
    start_of,
    time_of_link,
)
from bot.catchup.text import when
from bot.catchup.visibility import Access, Audience, visible
from bot.messages import CommandResult
from bot.read_check import CANNOT_READ, NOT_FOR_EVERYONE
from memory.catchup_store import CatchupStore
from memory.models import ChannelKey

__all__ = ["CANNOT_READ", "CATCHUP", "DEFAULT_HOURS", "LOOK_FURTHER", "USAGE", "Catchups", "Where"]

USAGE = f"Usage: /catchup [since] [time zone] [public]; for since, {ACCEPTED}."
CATCHUP: CommandSpec[CatchupArgs] = CommandSpec(
    "catchup", "[since] [time zone] [public]", USAGE, parse_catchup_args,
    public=lambda a: a.public)
"""The ``/catchup`` parser (``bot.commands.catchup`` declares the command with it)."""
DEFAULT_HOURS = 24
LOOK_FURTHER = "To look further back: /catchup 2h, /catchup yesterday or /catchup 3 days ago."


@dataclass(frozen=True, slots=True)
class Where:
    """A channel as an adapter sees it: its key, its threads (key → name), its links, the
    threads only their members may read (``private``), the person asking (``reader``;
    ``None`` when nobody asked or the platform cannot say), their ``locale`` (``en-US``,
    ``de``: how they write numeric dates; ``None`` when unknown) and what everyone who can
    see a post here may read (``everyone``; ``None`` when the platform cannot say);
    for the access lists (``bot.access``): ``parent``, the channel a thread is in (""
    elsewhere), ``direct``, whether it is a direct conversation, and ``roles``, the roles
    its person holds there (None where the platform has none)."""

    key: ChannelKey
    threads: Mapping[ChannelKey, str] = field(default_factory=dict)
    linker: Linker = plain_links
    private: frozenset[ChannelKey] = frozenset()
    reader: Access | None = None
    locale: str | None = None
    everyone: Access | None = None
    parent: str = ""
    direct: bool = False
    roles: tuple[str, ...] | None = None

    @property
    def scope(self) -> Scope:
        """The catch-up scope: the channel and its threads."""
        return Scope(self.key, self.threads)

    async def seen_by(self, public: bool) -> Where | None:
        """This place cut to what its answer's audience may read (``bot.catchup.visibility``):
        the reader alone, or everyone here when ``public``; ``None`` when the reader
        cannot read the channel itself."""
        audience = Audience(self.reader, public, self.everyone)
        keys = await visible(audience, self.key, self.threads, self.private)
        if self.key not in keys:
            return None
        threads = {k: name for k, name in self.threads.items() if k in keys}
        return replace(self, threads=threads, private=self.private & keys)


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
            start = start_of(read or read_since(since), since, now=now, zone=zone,
                             locale=where.locale)
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

    async def command(self, where: Where, author_id: str, args: str | CatchupArgs, *,
                      public: bool = False) -> CommandResult:
        """``/catchup`` for ``author_id`` in ``where`` with the command's text (or the
        arguments ``CATCHUP`` read from it); posted for everyone here when
        ``public`` (or the arguments say ``public``)."""
        if isinstance(args, str):
            parsed = CATCHUP.parse(args)
            if isinstance(parsed, Usage):
                return CommandResult(parsed.text, ok=False)
            args = parsed
        zone = args.zone or self.zone
        try:
            seen = await where.seen_by(public or args.public)
            if seen is None:
                return CommandResult(CANNOT_READ, ok=False)
            period = await self.period(seen, author_id, args.since, zone, read=args.start)
        except SinceError as e:
            return CommandResult(str(e), ok=False)
        result = await self.engine.run(seen.scope, period, seen.linker, zone=zone)
        if not args.since and not result.count:
            # Nothing since your own last message is the usual first try (at the console
            # always): say how to look further back.
            return CommandResult(f"{result.text}\n{LOOK_FURTHER}")
        return CommandResult(result.text)

    async def run(self, where: Where, period: Period, zone: ZoneInfo, *,
                  public: bool, title: str = "Catch-up") -> CatchupResult:
        """The catch-up of ``where`` over ``period``, cut for its audience: everyone in the
        channel when ``public`` (a digest), else the reader (see ``Where.seen_by``)."""
        seen = await where.seen_by(public)
        if seen is None:
            return CatchupResult(NOT_FOR_EVERYONE if public else CANNOT_READ, 0, refused=True)
        return await self.engine.run(seen.scope, period, seen.linker, zone=zone, title=title)
