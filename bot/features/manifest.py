"""What a feature is: one package that says, in one ``Feature``, everything the application
builds from it, as a discord.py cog or an Errbot plugin does.

- ``commands``: declared once (``bot.commands.declare.Command``) and placed by ``order`` in the
  one command table every platform renders (``bot.features.registry.COMMANDS``);
- ``role``: its storage role (``bot.stores.roles.Role``: tables and migrations for SQLite and
  PostgreSQL, and what ``copy-db`` copies and ``export`` writes of it);
- ``config_keys``: its settings in ``/config`` (``bot.channels.config.Key``, with choices);
- ``build``: its running object, made from ``Needs``; the object's hooks are the methods it
  has: ``prompt_lines`` (before a reply: ``bot.conversation.hooks``), ``start`` and
  ``close`` (its scheduled jobs), run by ``bot.features.runtime.RunningFeatures``.

Its wording lives in its own package beside the rest. Listing a feature is one line of
``bot.features.registry.FEATURES``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.channels.config import Key
from bot.commands.declare import Command
from bot.commands.registry import DEFAULT_ORDER
from bot.stores.roles import Role
from memory.models import ChannelKey
from memory.tokens import Tokenizer

__all__ = ["Feature", "Needs"]


@dataclass(frozen=True, slots=True)
class Needs:
    """What a feature's object is built from: its storage role's object (None: it has
    none), the tokenizer of the prompt, and the value in force of a ``/config`` key in a
    channel (``setting(key, name)``)."""

    store: Any
    tokenizer: Tokenizer
    setting: Callable[[ChannelKey, str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Feature:
    """One feature's manifest (see the module docstring)."""

    name: str
    commands: tuple[Command[Any], ...] = ()
    order: int = DEFAULT_ORDER
    role: Role | None = None
    config_keys: tuple[Key, ...] = ()
    build: Callable[[Needs], object] | None = None
