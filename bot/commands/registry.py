"""Every command, declared once (``bot.commands.declare``): ``COMMANDS`` is what each
platform generates its table from — Discord's application commands, Slack's slash commands
and manifest, the console's — and ``SPECS`` their argument parsers by name."""

from __future__ import annotations

from typing import Any

from bot.commands import memory
from bot.commands.args import CommandSpec, Usage
from bot.commands.catchup import CATCHUP_COMMAND
from bot.commands.config import CONFIG_COMMAND
from bot.commands.declare import Registry
from bot.commands.digest import DIGEST_COMMAND
from bot.commands.help import HELP_COMMAND

__all__ = ["COMMANDS", "SPECS", "parse"]

COMMANDS = Registry((*memory.COMMANDS, CONFIG_COMMAND, CATCHUP_COMMAND, DIGEST_COMMAND,
                     HELP_COMMAND))
SPECS: dict[str, CommandSpec[Any]] = {c.name: c.spec for c in COMMANDS}


def parse(name: str, text: str | None) -> Any:
    """``SPECS[name].parse(text)`` for a command name with or without its slash; an unknown
    name is a ``Usage`` too."""
    spec = SPECS.get(name.removeprefix("/"))
    if spec is None:
        return Usage(f"I don't know /{name.removeprefix('/')[:40]}.")
    return spec.parse(text)
