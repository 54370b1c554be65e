"""Platforms are found, not imported: each adapter package names a :class:`Platform` under
the ``gistbot.platforms`` entry points of ``pyproject.toml``, and the command line loads
the ones it starts by name. So ``bot/`` never imports ``adapters/``: the arrows run from
the adapters down to ``bot`` and the composition sits above both, in the installed
package's metadata.

A platform is launched with a :class:`Launch` (the service, the settings, the backfill history, the
stop event; the console also reads its channel, log line and banner) and returns an exit
status. A name without an entry point is a ``ConfigError`` naming the reinstall.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from bot.errors import ConfigError
from bot.ops.extras import Extra

if TYPE_CHECKING:
    from bot.conversation.service import ChatService
    from bot.ops.logs import LiveLine
    from bot.settings import Settings

__all__ = ["GROUP", "Launch", "Platform", "load_platform"]

GROUP = "gistbot.platforms"


@dataclass(frozen=True, slots=True)
class Launch:
    """What a platform starts with. ``history`` is what a backfill after downtime reads and
    marks (memory plus its backfill marks); ``channel``, ``live``, ``json_lines`` and ``banner``
    are the terminal chat's (``gistbot console``)."""

    service: ChatService
    settings: Settings
    history: object
    stop: asyncio.Event
    live: LiveLine | None = None
    channel: str = "general"
    json_lines: bool = False
    banner: str = ""


@dataclass(frozen=True, slots=True)
class Platform:
    """A chat platform as the command line sees it: its name, how to serve it until
    ``stop`` (the exit status), the optional part it needs installed (``None``: always
    there), and, for Discord, the URL that invites the bot."""

    name: str
    serve: Callable[[Launch], Awaitable[int]]
    extra: Extra | None = None
    invite_url: Callable[[str], str] | None = None


def load_platform(name: str) -> Platform:
    """The platform registered as ``name`` under ``gistbot.platforms``; ``ConfigError``
    when none is (the package was not installed, or installed without its metadata)."""
    found = entry_points(group=GROUP).select(name=name)
    for entry in found:
        platform = entry.load()
        if not isinstance(platform, Platform):
            raise ConfigError(
                f"the entry point {GROUP}:{name} ({entry.value}) is not a Platform")
        return platform
    raise ConfigError(
        f"no platform {name!r} is installed: gistbot finds its platforms through the "
        f"{GROUP!r} entry points of its package, and none is named {name!r}. Install "
        "gistbot (`pip install -e .` in a checkout, or `pip install gistbot`) instead of "
        "running it from an uninstalled source tree"
    )
