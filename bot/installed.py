"""The installed platforms, asked by name: what the core may know of a platform without
naming one.

Each adapter package registers a ``bot.plugins.Platform`` under the ``gistbot.platforms``
entry points of its distribution. This module reads the names from the package metadata
and loads an entry only when a question about it is asked: whether a key is a direct
conversation (``is_direct``: what is billed without a message in hand) and whether
whoever writes on a platform is the operator at their own terminal (``is_trusted``: no
access lists, quota, rate limit or owed replies there). It imports nothing of the
service, so the access lists, the quota, the rate limit and the owed replies may ask it;
``bot.plugins`` (what a platform is, and how one is started) sits above them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from bot.errors import ConfigError

if TYPE_CHECKING:
    from memory.models import ChannelKey

__all__ = ["GROUP", "Answers", "entry", "is_direct", "is_trusted", "platform_names"]

GROUP = "gistbot.platforms"


@runtime_checkable
class Answers(Protocol):
    """What the core asks of a platform (a ``bot.plugins.Platform`` answers it)."""

    @property
    def is_direct(self) -> Callable[[ChannelKey], bool] | None: ...

    @property
    def trusted(self) -> bool: ...


def entry(name: str) -> tuple[str, object]:
    """The entry point registered as ``name`` (what it names, and the object it loads);
    ``ConfigError`` when none is (the package was not installed, or without its metadata)."""
    for found in entry_points(group=GROUP).select(name=name):
        return found.value, found.load()
    raise ConfigError(
        f"no platform {name!r} is installed: gistbot finds its platforms through the "
        f"{GROUP!r} entry points of its package, and none is named {name!r}. Install "
        "gistbot (`pip install -e .` in a checkout, or `pip install gistbot`) instead of "
        "running it from an uninstalled source tree"
    )


@cache
def platform_names() -> tuple[str, ...]:
    """The names of the installed platforms, sorted (read once from the metadata: nothing
    is imported; the metrics label every turn with one)."""
    return tuple(sorted(entry_points(group=GROUP).names))


@cache
def _answers(platform: str) -> Answers | None:
    """The installed platform's answers, loaded once (every message and bill asks); None
    for a platform not installed (from an export, a test)."""
    if platform not in platform_names():
        return None
    loaded = entry(platform)[1]
    return loaded if isinstance(loaded, Answers) else None


def is_direct(key: ChannelKey) -> bool:
    """Whether ``key`` is a direct conversation, as the platform it belongs to says."""
    answers = _answers(key.platform)
    rule = answers.is_direct if answers is not None else None
    return rule is not None and rule(key)


def is_trusted(platform: str) -> bool:
    """Whether ``platform`` says whoever writes on it is the operator at their own
    terminal (trusted: never refused, billed, limited or owed a reply)."""
    answers = _answers(platform)
    return answers is not None and answers.trusted
