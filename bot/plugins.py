"""Platforms are found, not imported: each adapter package names a :class:`Platform` under
the ``gistbot.platforms`` entry points of ``pyproject.toml``, and the command line loads
the ones it starts by name. So ``bot/`` never imports ``adapters/``: the arrows run from
the adapters down to ``bot`` and the composition sits above both, in the installed
package's metadata.

A platform is launched with a :class:`Launch` (the features, the settings, the backfill history, the
stop event; the console also reads its channel, log line and banner) and returns an exit
status. A name without an entry point is a ``ConfigError`` naming the reinstall.

The platforms also answer what only they know, so the core holds no platform names or
rules: which are configured (``configured_platforms``, asked of each platform's entry),
and, through ``bot.installed`` (below the service, so the core can ask it), the label set
of the metrics (``platform_names``), whether a conversation's key is a direct one
(``is_direct``) and whether a platform's author is the operator at their own terminal
(``is_trusted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from bot.errors import ConfigError
from bot.extras import Extra
from bot.installed import GROUP, entry, is_direct, is_trusted, platform_names

if TYPE_CHECKING:
    from bot.ops.logs import LiveLine
    from bot.parts import Features
    from bot.settings import Settings
    from memory.models import ChannelKey

__all__ = ["GROUP", "Launch", "Platform", "configured_platforms", "is_direct", "is_trusted",
           "load_platform", "platform_names"]


@dataclass(frozen=True, slots=True)
class Launch:
    """What a platform starts with. ``history`` is what a backfill after downtime reads and
    marks (memory plus its backfill marks); ``channel``, ``live``, ``json_lines`` and ``banner``
    are the terminal chat's (``gistbot console``)."""

    features: Features  # the message pipeline and the parts beside it (bot.features)
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
    there), and, for Discord, the URL that invites the bot. ``configured`` says whether
    the settings name this platform (``None``: never by itself; the console starts when
    none is); ``is_direct`` whether a key of this platform is a direct conversation
    (``None``: none is); ``trusted`` that whoever writes on it is the operator at their
    own terminal (no access lists, quota, rate limit or owed-reply bookkeeping)."""

    name: str
    serve: Callable[[Launch], Awaitable[int]]
    extra: Extra | None = None
    invite_url: Callable[[str], str] | None = None
    configured: Callable[[Settings], bool] | None = None
    is_direct: Callable[[ChannelKey], bool] | None = None
    trusted: bool = False


def load_platform(name: str) -> Platform:
    """The platform registered as ``name`` under ``gistbot.platforms``; ``ConfigError``
    when none is (the package was not installed, or installed without its metadata)."""
    value, platform = entry(name)
    if not isinstance(platform, Platform):
        raise ConfigError(f"the entry point {GROUP}:{name} ({value}) is not a Platform")
    return platform


def configured_platforms(settings: Settings) -> list[str]:
    """The installed platforms whose settings are present, by name (none means: the
    console). Loading a platform imports its package, not its library."""
    out = []
    for name in platform_names():
        configured = _installed(name).configured
        if configured is not None and configured(settings):
            out.append(name)
    return out


@cache
def _installed(name: str) -> Platform:
    """The installed platform ``name``, loaded once (``/readyz`` asks on every probe)."""
    return load_platform(name)
