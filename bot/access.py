"""Who may talk to the bot, and where: the allow and block lists (``AccessSettings``).

One check (``AccessRules.verdict``) for both doors: ``ChatService.receive`` (and backfill)
asks it before a message is recorded or answered, ``Command.respond`` before a command
runs. The adapter supplies who and where (the author's id, their Discord role ids, the
channel and, for a thread, its parent channel, whether it is a direct message); the rules
here know no platform.

- A **channel** outside the lists (blocked, or not in a non-empty ``ALLOWED_CHANNELS``)
  is out of bounds: nothing there is answered or stored. Direct messages are governed by
  ``ALLOW_DMS`` alone; a thread counts as its parent channel.
- A **person** outside the lists (blocked by id or by a role, or in neither non-empty
  allow list) is never answered and gets no command output; their messages are stored
  as part of the channel's conversation unless ``RECORD_BLOCKED`` is false. Block wins
  over allow. Roles are known only where the platform has them (``roles`` None: Slack,
  the console): there the role lists do not apply.
- A late answer (the missed-mention sweep) and a scheduled digest ask the lists as they
  stand then. A server's own lists (``/config set server blocked_users …``) only narrow
  the operator's. A trusted platform (the operator's own terminal, as the platform says:
  ``bot.installed.is_trusted``) is never refused.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bot.installed import is_trusted
from bot.settings.sections import AccessSettings
from memory.models import ChannelKey

__all__ = ["LIST_NAMES", "NO_LISTS", "REFUSED", "AccessRules", "Lists", "Verdict"]

REFUSED = "Sorry, you can't use gistbot here."  # a slash command's private refusal


class Verdict(enum.Enum):
    """What the lists say about one message or command."""

    ADMITTED = "admitted"
    PERSON = "person"  # blocked, or outside the allow lists: never answered
    CHANNEL = "channel"  # a channel the bot stays out of: nothing answered or stored
    DIRECT = "direct"  # a direct message while ALLOW_DMS is false: as a blocked channel


LIST_NAMES = ("allowed_users", "blocked_users", "allowed_roles", "blocked_roles",
              "allowed_channels", "blocked_channels")


@dataclass(frozen=True, slots=True)
class Lists:
    """One set of allow and block lists: the operator's (``AccessSettings``) or a server's
    (``/config set server blocked_users …``). Empty allow lists allow everyone."""

    allowed_users: frozenset[str] = frozenset()
    blocked_users: frozenset[str] = frozenset()
    allowed_roles: frozenset[str] = frozenset()
    blocked_roles: frozenset[str] = frozenset()
    allowed_channels: frozenset[str] = frozenset()
    blocked_channels: frozenset[str] = frozenset()

    @classmethod
    def of(cls, values: Mapping[str, Iterable[str]]) -> Lists:
        """The lists named in ``values`` (``LIST_NAMES``; the others empty)."""
        return cls(**{n: frozenset(values.get(n, ())) for n in LIST_NAMES})

    def keeps_out(self, where: set[str]) -> bool:
        """Whether a channel (with the thread in it: ``where``) is out of bounds."""
        return bool(where & self.blocked_channels) or bool(
            self.allowed_channels and not where & self.allowed_channels)

    def turns_away(self, user_id: str, roles: Iterable[str] | None) -> bool:
        """Whether the person is blocked or outside the allow lists; ``roles`` None: the
        platform has none, so the role lists do not apply."""
        held = frozenset(roles or ())
        if user_id in self.blocked_users or held & self.blocked_roles:
            return True
        role_list = self.allowed_roles if roles is not None else frozenset()
        return bool(self.allowed_users or role_list) and not (
            user_id in self.allowed_users or held & role_list)


NO_LISTS = Lists()


class AccessRules:
    """The operator's lists (``AccessSettings``), with a server's own on top (``/config``):
    asked once per message and command."""

    def __init__(self, settings: AccessSettings | None = None) -> None:
        s = settings or AccessSettings()
        self.allow_dms, self.record_blocked = s.allow_dms, s.record_blocked
        self.lists = Lists.of({n: getattr(s, n) for n in LIST_NAMES})

    def verdict(self, key: ChannelKey, user_id: str, roles: Iterable[str] | None, *,
                direct: bool, parent: str = "", server: Lists = NO_LISTS) -> Verdict:
        """Whether ``user_id`` (with Discord ``roles``; None: the platform has none) may
        talk to the bot in channel ``key`` (``parent``: the channel a thread is in).
        ``server``: the server's own lists, which can only narrow the operator's: a
        server cannot let in whom the operator keeps out."""
        if is_trusted(key.platform):  # the operator at their own terminal
            return Verdict.ADMITTED
        if direct:
            if not self.allow_dms:
                return Verdict.DIRECT
        elif self.keeps_out(key, parent=parent, server=server):
            return Verdict.CHANNEL
        if any(lists.turns_away(user_id, roles) for lists in (self.lists, server)):
            return Verdict.PERSON
        return Verdict.ADMITTED

    def keeps_out(self, key: ChannelKey, *, parent: str = "",
                  server: Lists = NO_LISTS) -> bool:
        """Whether channel ``key`` (``parent``: the channel a thread is in) is out of
        bounds, whoever is there: nothing is answered, stored or posted in it (a scheduled
        digest asks this, as no person is asking then)."""
        if is_trusted(key.platform):
            return False
        return any(lists.keeps_out({key.channel, parent} - {""})
                   for lists in (self.lists, server))

    def records(self, verdict: Verdict) -> bool:
        """Whether a message with ``verdict`` may be stored (the channel's ``record``
        setting still decides): never in a channel the bot stays out of."""
        if verdict is Verdict.PERSON:
            return self.record_blocked
        return verdict is Verdict.ADMITTED
