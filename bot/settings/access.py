"""The settings of who may talk to the bot (``bot.access``), and the check of the ids its
lists hold (also used by ``/config``'s server lists)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from bot.settings.base import CsvList, Section, split_csv

__all__ = ["AccessSettings", "check_ids"]


# A platform's id as people copy it: a Discord snowflake (digits) or a Slack id (U…, C…)
_ID = re.compile(r"^(?:\d{1,20}|[A-Z][A-Z0-9]{1,20})$")
_ID_HELP = {
    "user": "Discord: Developer Mode, then a person's Copy User ID; Slack: a profile's ⋮ → "
            "Copy member ID",
    "role": "Discord: Developer Mode, then Server Settings → Roles → a role's ⋯ → Copy Role ID",
    "channel": "Discord: Developer Mode, then a channel's Copy Channel ID; Slack: a channel's "
               "details, at the bottom",
}


def check_ids(values: list[str], what: Literal["user", "role", "channel"]) -> list[str]:
    """``values`` without repeats, or ``ValueError`` naming the first that is not a
    ``what`` id (a name or a mention, say) and where to copy the id."""
    bad = [v for v in values if not _ID.match(v)]
    if bad:
        raise ValueError(
            f"{bad[0][:40]!r} is not a {what} id: list ids, not names or mentions, "
            f"separated by commas ({_ID_HELP[what]})")
    return list(dict.fromkeys(values))


def _ids(what: Literal["user", "role", "channel"]) -> Any:
    """A validator of a comma-separated list of ``what`` ids."""

    def check(values: list[str]) -> list[str]:
        return check_ids(values, what)

    return check


class AccessSettings(Section):
    """Who may talk to the bot, and where (``bot.access``): allow and block lists of
    people, Discord roles and channels, and direct messages."""

    model_config = ConfigDict(title="Who may talk to the bot")

    allowed_users: CsvList = Field(default=[], description=(
        "Comma-separated user ids (Discord or Slack) who may talk to the bot. Empty: "
        "everyone (unless ALLOWED_ROLES is set). With both platforms, list people of both."))
    blocked_users: CsvList = Field(default=[], description=(
        "Comma-separated user ids the bot ignores: no reply, no command output (a slash "
        "command gets a short private refusal). Wins over every allow list."))
    allowed_roles: CsvList = Field(default=[], description=(
        "Comma-separated Discord role ids whose members may talk to the bot (besides "
        "ALLOWED_USERS). Empty: everyone. Slack has no roles: there it does not apply; in a "
        "Discord DM nobody has roles, so only ALLOWED_USERS are let in."))
    blocked_roles: CsvList = Field(default=[], description=(
        "Comma-separated Discord role ids whose members the bot ignores, as BLOCKED_USERS."))
    allowed_channels: CsvList = Field(default=[], description=(
        "Comma-separated channel ids where the bot answers and remembers (a Discord "
        "thread counts as its channel). Empty: every channel it can see. DMs are "
        "ALLOW_DMS's."))
    blocked_channels: CsvList = Field(default=[], description=(
        "Comma-separated channel ids where the bot neither answers nor remembers anything. "
        "Wins over ALLOWED_CHANNELS."))
    allow_dms: bool = Field(default=True, description=(
        "Direct messages to the bot are answered (and remembered). false: a DM gets no "
        "reply and is not stored; a slash command in a DM gets a short refusal."))
    record_blocked: bool = Field(default=True, description=(
        "A blocked person's messages (or one outside the allow lists) in a channel the bot "
        "remembers are still stored as part of the channel's conversation, so summaries "
        "and catch-ups have no holes; they are never answered. false: they are not stored."))

    _csv = field_validator("allowed_users", "blocked_users", "allowed_roles",
                           "blocked_roles", "allowed_channels", "blocked_channels",
                           mode="before")(split_csv)
    _users = field_validator("allowed_users", "blocked_users")(_ids("user"))
    _roles = field_validator("allowed_roles", "blocked_roles")(_ids("role"))
    _channels = field_validator("allowed_channels", "blocked_channels")(_ids("channel"))
