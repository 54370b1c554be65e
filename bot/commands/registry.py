"""Every command, found where it is declared: each module of ``bot.commands`` that exports
``COMMANDS`` (a tuple of ``declare.Command``) is collected, so a new command is one new
file. ``ORDER`` (default 50) places a module's commands in the listing; modules of one
order follow their names. ``COMMANDS`` holds these core commands and ``SPECS`` their
argument parsers by name; the features (``bot.features``) add theirs through ``discover``'s
``extra``, and ``bot.features.registry.COMMANDS`` is what each platform generates its table
from — Discord's application commands, Slack's slash commands and manifest, the console's.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import bot.commands
from bot.arguments import CommandSpec, Usage
from bot.commands.declare import Command, Registry

__all__ = ["COMMANDS", "DEFAULT_ORDER", "SPECS", "discover", "parse"]

DEFAULT_ORDER = 50


def _declaring(package: ModuleType) -> list[ModuleType]:
    """The modules of ``package`` that export ``COMMANDS``, in their declared order."""
    found = []
    for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
        module = importlib.import_module(info.name)
        if hasattr(module, "COMMANDS") and module.__name__ != __name__:
            found.append(module)
    return sorted(found, key=lambda m: (getattr(m, "ORDER", DEFAULT_ORDER), m.__name__))


Declared = tuple[int, str, Sequence[Any]]
"""(order, name, commands) of one declaring module or feature."""


def discover(package: ModuleType = bot.commands, extra: Sequence[Declared] = ()) -> Registry:
    """The registry of every command declared in ``package``'s modules, and ``extra``'s
    (a feature's commands, its order and its name), placed by order then name; commands
    that are not ``Command`` objects are a ``TypeError`` naming where they were declared."""
    found: list[Declared] = [(getattr(m, "ORDER", DEFAULT_ORDER), m.__name__, m.COMMANDS)
                             for m in _declaring(package)]
    commands: list[Command[Any]] = []
    for _order, name, declared in sorted([*found, *extra], key=lambda d: (d[0], d[1])):
        if not all(isinstance(c, Command) for c in declared):
            raise TypeError(f"{name}.COMMANDS holds something not a Command")
        commands += declared
    return Registry(tuple(commands))


COMMANDS = discover()
SPECS: dict[str, CommandSpec[Any]] = {c.name: c.spec for c in COMMANDS}


def parse(name: str, text: str | None) -> Any:
    """``SPECS[name].parse(text)`` for a command name with or without its slash; an unknown
    name is a ``Usage`` too."""
    spec = SPECS.get(name.removeprefix("/"))
    if spec is None:
        return Usage(f"I don't know /{name.removeprefix('/')[:40]}.")
    return spec.parse(text)
