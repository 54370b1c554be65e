"""Every command's argument spec by name: what each platform's entry point parses with
before any other work (the permission and visibility of each command stay with its
platform code for now)."""

from __future__ import annotations

from typing import Any

from bot.commands.args import CommandSpec, Usage
from bot.commands.catchup import CATCHUP
from bot.commands.config import CONFIG
from bot.commands.digest import DIGEST
from bot.commands.memory import FORGET, MEMORY, REMEMBER, RESET, SUMMARY

__all__ = ["SPECS", "parse"]

SPECS: dict[str, CommandSpec[Any]] = {
    spec.name: spec for spec in (SUMMARY, RESET, REMEMBER, MEMORY, FORGET, CONFIG, CATCHUP,
                                 DIGEST)
}


def parse(name: str, text: str | None) -> Any:
    """``SPECS[name].parse(text)`` for a command name with or without its slash; an unknown
    name is a ``Usage`` too."""
    spec = SPECS.get(name.removeprefix("/"))
    if spec is None:
        return Usage(f"I don't know /{name.removeprefix('/')[:40]}.")
    return spec.parse(text)
