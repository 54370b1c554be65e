"""Time zones by IANA name (``Europe/Berlin``, ``UTC``): the one reading of a zone's name
that ``CATCHUP_TIMEZONE``, ``/catchup`` and ``/digest`` share."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.arguments import ArgumentError

__all__ = ["UnknownZone", "parse_zone"]


class UnknownZone(ArgumentError):
    """A zone name gistbot cannot find; the message is for the user."""


def parse_zone(name: str) -> ZoneInfo:
    """An IANA zone (``Europe/Berlin``, ``UTC``); ``UnknownZone`` naming it otherwise."""
    shown = name if len(name) <= 60 else name[:60] + "…"
    try:
        if name.upper() in ("UTC", "GMT", "Z"):
            return ZoneInfo("UTC")
        if len(name) > 60 or not re.fullmatch(r"[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)+", name):
            raise ZoneInfoNotFoundError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory, say
        raise UnknownZone(f"I don't know the time zone {shown!r}; use an IANA name such as "
                          "Europe/Berlin, America/New_York or Asia/Seoul") from None
