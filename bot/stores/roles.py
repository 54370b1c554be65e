"""A storage role a feature declares (``bot.features``): what ``Storage`` composes, migrates,
copies and exports for it without knowing the feature.

A ``Role`` names its migration ladder (``bot.stores.schema``: SQLite and PostgreSQL DDL), the
object it is on each backend (built on the memory store, sharing its writer or pool), and
what ``copy-db`` and ``export`` do with it: ``copy`` moves every row from a source role
object to a target one and verifies (``False``: they differ), ``export`` answers the rows
of one channel's export as JSON-ready dicts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.stores.schema import Ladder
from memory.models import ChannelKey
from memory.stores.sqlite.store import SqliteStore

__all__ = ["Copy", "Export", "Role"]

Copy = Callable[[Any, Any], Awaitable[bool]]
"""``copy(source, target)``: every row of the role copied, True when the target then holds
exactly the source's rows."""
Export = Callable[[Any, ChannelKey], Awaitable[list[dict[str, object]]]]
"""``export(role, key)``: the lines ``gistbot export`` writes of the role for ``key``."""


@dataclass(frozen=True, slots=True)
class Role:
    """A feature's storage role; ``name`` is how ``Storage.role`` finds its object."""

    name: str
    ladder: Ladder
    sqlite: Callable[[SqliteStore], Any]
    postgres: Callable[[Any], Any]
    copy: Copy | None = None
    export: Export | None = None
