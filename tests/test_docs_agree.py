"""The documentation says what the code does: each command's usage as the registry declares
it (docs/commands.md and the README's table), and the console's default channel."""

from __future__ import annotations

import inspect
from pathlib import Path

from adapters.console_adapter import ConsoleChat
from bot.cli import _parser
from bot.features.registry import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS_MD = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
PLATFORMS_MD = (ROOT / "docs" / "platforms.md").read_text(encoding="utf-8")


def in_table(usage: str) -> str:
    """How a usage is written in a Markdown table cell: code, with ``|`` escaped."""
    return "`" + usage.replace("|", "\\|") + "`"


def test_every_command_usage_is_written_as_the_registry_declares_it() -> None:
    for name in COMMANDS.names():
        usage = COMMANDS.get(name).usage  # type: ignore[union-attr]
        assert in_table(usage) in COMMANDS_MD, f"docs/commands.md lacks {usage}"
        if name != "digest":  # the README shows /digest by its forms
            assert in_table(usage) in README, f"the README lacks {usage}"
    assert "[zone]" not in README + COMMANDS_MD  # the registry says [time zone]


def test_the_console_channel_the_docs_name_is_the_default() -> None:
    sub = next(a for a in _parser()._actions if a.dest == "command")
    console = sub.choices["console"]  # type: ignore[index]
    [channel] = [a.default for a in console._actions if a.dest == "channel"]
    assert inspect.signature(ConsoleChat).parameters["channel"].default == channel
    assert f"in the channel `{channel}` unless `--channel NAME`" in " ".join(
        PLATFORMS_MD.split())
    assert f"talks in the channel `{channel}`" in " ".join(README.split())
