"""``/config``, declared for every platform: the text form (Slack, console; grammar in
``bot.channels.config_command.parse_config``) and Discord's option fields, checked alike, and who
may change what (a channel's settings, a server's).

A value may be free text (a persona, a language name in any script); the other settings'
values are names and numbers, so they are read with ASCII digits only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bot.arguments import ArgumentError, CommandSpec, Usage, unreadable
from bot.channels.config import KEYS
from bot.channels.config_command import ACTIONS, USAGE, Caller, ConfigRequest, parse_config
from bot.commands.declare import Argument, Command, Context, Permission
from bot.messages import CommandResult

if TYPE_CHECKING:
    from bot.commands.declare import CommandService, Registry

__all__ = ["COMMANDS", "CONFIG", "CONFIG_COMMAND", "FREE_TEXT", "MAX_CHARS", "ORDER",
           "config_fields"]

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


def _options(options: Mapping[str, Any]) -> ConfigRequest | Usage:
    return config_fields(str(options.get("action") or "show"), str(options.get("key") or ""),
                         str(options.get("value") or ""), options.get("scope") == "server")


async def _run(ctx: Context, args: ConfigRequest) -> CommandResult:
    changing = args.action in ("set", "unset")  # only a change asks who the caller is
    channel, server = Permission.MANAGE_CHANNEL, Permission.MANAGE_SERVER
    caller = Caller(
        ctx.user_id, await ctx.user_name() or ctx.user_id, is_direct=ctx.is_direct,
        may_channel=changing and await ctx.may(channel),
        may_server=changing and await ctx.may(server),
        channel_rule=ctx.refusal(channel, "change this channel's settings"),
        server_rule=ctx.refusal(server, "change this server's settings"))
    return await ctx.features.config_command.configure(ctx.key, args, caller)


def _keys(features: CommandService, commands: Registry,
          options: Mapping[str, str]) -> Sequence[str]:
    return list(features.channels.defaults.keys)


def _values(features: CommandService, commands: Registry,
            options: Mapping[str, str]) -> Sequence[str]:
    key = options.get("key", "")
    if key in ("model", "summary_model"):
        return list(features.channels.defaults.allowed_models)
    keys = features.channels.defaults.keys
    return list(keys[key].choices) if key in keys else []


CONFIG_COMMAND: Command[ConfigRequest] = Command(
    CONFIG, "Show or change this channel's settings (only you see it)", _run,
    (Argument("action", "show (default), set, unset, history or usage", "choice",
              choices=ACTIONS, examples=("show", "set persona You are terse.", "history")),
     Argument("key", "Which setting", suggest=_keys, examples=tuple(KEYS)),
     Argument("value", "The new value (for set)", suggest=_values),
     Argument("scope", "This channel (default) or the whole server", "choice",
              choices=("channel", "server"))),
    permission=Permission.MANAGE_CHANNEL, needed_for="changing a channel's settings",
    note="anyone may look (show, history, usage); the server's settings: {manage_server}; "
         "nothing can be changed in a direct message",
    from_options=_options, manages_access=True)

ORDER = 20  # where the registry lists it
COMMANDS = (CONFIG_COMMAND,)
