"""``/config``'s arguments: the text form (Slack, console; grammar in
``bot.config_command.parse_config``) and Discord's option fields, checked alike.

A value may be free text (a persona, a language name in any script); the other settings'
values are names and numbers, so they are read with ASCII digits only.
"""

from __future__ import annotations

from bot.commands.args import ArgumentError, CommandSpec, Usage, unreadable
from bot.config_command import ACTIONS, USAGE, ConfigRequest, parse_config

__all__ = ["CONFIG", "FREE_TEXT", "MAX_CHARS", "config_fields"]

FREE_TEXT = ("persona", "language")
MAX_CHARS = 4000  # a persona is at most 2,000; the setting says so itself below this


def _checked(request: ConfigRequest) -> ConfigRequest:
    if request.key not in FREE_TEXT and (why := unreadable(request.value, words=True)):
        raise ArgumentError(f"I can't read that value. {why} {USAGE}")
    return request


def _grammar(text: str) -> ConfigRequest | Usage:
    parsed = parse_config(text)
    return Usage(parsed) if isinstance(parsed, str) else _checked(parsed)


def config_fields(action: str, key: str, value: str, server: bool) -> ConfigRequest | Usage:
    """Discord's ``/config`` options as a request, checked as the text form is."""
    if action not in ACTIONS:
        return Usage(f"I don't know /config {action[:40]}. {USAGE}")
    refused = CONFIG.check(f"{key} {value}")  # length, control characters
    if refused is not None:
        return refused
    key = key.strip().lower()
    if unreadable(key, words=True) or len(key.split()) > 1:
        return Usage(f"There is no setting {key[:40]!r}. {USAGE}")
    try:
        return _checked(ConfigRequest(action, key, value.strip(), server))
    except ArgumentError as e:
        return Usage(str(e))


CONFIG: CommandSpec[ConfigRequest] = CommandSpec(
    "config", "[show|set|unset|history|usage] [server] [key] [value]", USAGE, _grammar,
    max_chars=MAX_CHARS, words=False)
