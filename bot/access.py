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
- The console is the operator's own terminal and is never refused.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from bot.settings.sections import AccessSettings
from memory.models import ChannelKey

__all__ = ["REFUSED", "AccessRules", "Verdict"]

REFUSED = "Sorry, you can't use gistbot here."  # a slash command's private refusal


class Verdict(enum.Enum):
    """What the lists say about one message or command."""

    ADMITTED = "admitted"
    PERSON = "person"  # blocked, or outside the allow lists: never answered
    CHANNEL = "channel"  # a channel the bot stays out of: nothing answered or stored
    DIRECT = "direct"  # a direct message while ALLOW_DMS is false: as a blocked channel


class AccessRules:
    """The allow and block lists of ``AccessSettings``, asked once per message and command."""

    def __init__(self, settings: AccessSettings | None = None) -> None:
        s = settings or AccessSettings()
        self.allow_dms, self.record_blocked = s.allow_dms, s.record_blocked
        self.allowed_users, self.blocked_users = frozenset(s.allowed_users), frozenset(
            s.blocked_users)
        self.allowed_roles, self.blocked_roles = frozenset(s.allowed_roles), frozenset(
            s.blocked_roles)
        self.allowed_channels, self.blocked_channels = frozenset(s.allowed_channels), frozenset(
            s.blocked_channels)

    def verdict(self, key: ChannelKey, user_id: str, roles: Iterable[str] | None, *,
                direct: bool, parent: str = "") -> Verdict:
        """Whether ``user_id`` (with Discord ``roles``; None: the platform has none) may
        talk to the bot in channel ``key`` (``parent``: the channel a thread is in)."""
        if key.platform == "console":  # the operator at their own terminal
            return Verdict.ADMITTED
        if direct:
            if not self.allow_dms:
                return Verdict.DIRECT
        else:
            where = {key.channel, parent} - {""}
            if where & self.blocked_channels or (
                    self.allowed_channels and not where & self.allowed_channels):
                return Verdict.CHANNEL
        held = frozenset(roles or ())
        if user_id in self.blocked_users or held & self.blocked_roles:
            return Verdict.PERSON
        role_list = self.allowed_roles if roles is not None else frozenset()
        if (self.allowed_users or role_list) and not (
                user_id in self.allowed_users or held & role_list):
            return Verdict.PERSON
        return Verdict.ADMITTED

    def records(self, verdict: Verdict) -> bool:
        """Whether a message with ``verdict`` may be stored (the channel's ``record``
        setting still decides): never in a channel the bot stays out of."""
        if verdict is Verdict.PERSON:
            return self.record_blocked
        return verdict is Verdict.ADMITTED
