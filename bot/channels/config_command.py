"""``/config``: show, set, unset, history and usage of a channel's settings — one grammar and
one set of answers for Discord, Slack and the console.

Text form (Slack, console)::

    /config [show] [server]          /config set [server] KEY VALUE…
    /config unset [server] KEY       /config history          /config usage

``server`` (also ``scope:server`` or ``--server``) right after the action acts on the
server/workspace defaults instead of the channel. Discord passes the same fields as
slash-command options.

Who may change what (``refusal``): reading is for anyone; changing a channel's settings
needs ``Caller.may_channel`` (Discord: Manage Channels; Slack: admin/owner or
``SLACK_ADMIN_USER_IDS``), the server's needs ``Caller.may_server`` (Discord: Manage
Server). Nothing can be changed from a direct message (there the operator's defaults
apply); the console is the operator's and may change everything. Every change is stored
with who made it and when, and ``history`` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.access import LIST_NAMES
from bot.channels.config import KEYS, ChannelConfig, ChannelSettings, Invalid, Key, scope_of
from bot.channels.quota import KINDS, PERSONAL_KINDS, Quota
from bot.messages import CommandResult
from bot.stores.settings import SERVER
from bot.stores.usage import UsageKey
from memory.models import ChannelKey

__all__ = ["ACTIONS", "Caller", "ConfigCommand", "ConfigRequest", "parse_config", "refusal",
           "run_config"]

ACTIONS = ("show", "set", "unset", "history", "usage")
_SERVER_WORDS = ("server", "scope:server", "--server", "workspace", "scope:workspace")
_CHANNEL_WORDS = ("channel", "scope:channel", "--channel")
HISTORY_LIMIT = 15
_SHOWN_CHARS = 160
USAGE = ("Usage: /config [show|set|unset|history|usage] [server] [key] [value]. "
         f"Keys: {', '.join(KEYS)}.")


@dataclass(frozen=True, slots=True)
class ConfigRequest:
    """One ``/config`` invocation, platform-neutral."""

    action: str = "show"
    key: str = ""
    value: str = ""
    server: bool = False


@dataclass(frozen=True, slots=True)
class Caller:
    """Who runs the command and what their platform lets them change."""

    user_id: str
    name: str
    is_direct: bool = False
    may_channel: bool = False
    may_server: bool = False
    channel_rule: str = "You may not change this channel's settings."
    server_rule: str = "You may not change this server's settings."


def parse_config(text: str) -> ConfigRequest | str:
    """The request in ``text`` (the words after ``/config``), or a usage message."""
    words = text.strip().split(maxsplit=1)
    if not words:
        return ConfigRequest()
    action, rest = words[0].lower(), (words[1] if len(words) > 1 else "")
    if action in _SERVER_WORDS:  # "/config server" = show the server's settings
        action, rest = "show", f"server {rest}"
    if action not in ACTIONS:
        return f"I don't know /config {words[0]}. {USAGE}"
    server = False
    head, _, tail = rest.strip().partition(" ")
    while head.lower() in _SERVER_WORDS + _CHANNEL_WORDS:
        server = head.lower() in _SERVER_WORDS
        head, _, tail = tail.strip().partition(" ")
    return ConfigRequest(action, head.strip().lower(), tail.strip(), server)


def refusal(caller: Caller, request: ConfigRequest, keys: Mapping[str, Key] = KEYS
            ) -> str | None:
    """Why ``caller`` may not make this change, or None when they may (``keys``: every key
    ``/config`` knows, the features' too)."""
    if request.action not in ("set", "unset"):
        return None
    if caller.is_direct:
        return ("Settings can't be changed in a direct message; the operator's defaults apply "
                "here. Use /config in a server channel.")
    if request.server or (request.key in keys and keys[request.key].server_only):
        return None if caller.may_server else caller.server_rule
    return None if caller.may_channel else caller.channel_rule


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _short(value: str) -> str:
    one_line = " ".join(value.split())
    return one_line if len(one_line) <= _SHOWN_CHARS else one_line[:_SHOWN_CHARS] + "…"


def _shown(name: str, value: str) -> str:
    if name == "language" and not value:
        return "(the conversation's)"
    if name.startswith("daily_tokens") and value == "0":
        return "no limit"
    if name in LIST_NAMES and not value:
        return "(none: the operator's lists only)"
    return _short(value)


class ConfigCommand:
    """The ``/config`` feature over a channel's settings and quotas."""

    def __init__(self, channels: ChannelConfig, quota: Quota) -> None:
        self.channels, self.quota = channels, quota

    async def configure(self, key: ChannelKey, request: ConfigRequest, caller: Caller
                        ) -> CommandResult:
        """``/config`` in channel ``key`` (answered to the caller only)."""
        return await run_config(key, request, caller, self.channels, self.quota)


async def run_config(key: ChannelKey, request: ConfigRequest, caller: Caller,
                     channels: ChannelConfig, quota: Quota) -> CommandResult:
    """Answer one ``/config`` request in channel ``key`` (always privately)."""
    if request.action == "usage":
        return await _usage(key, caller, channels, quota)
    if request.action == "history":
        return await _history(key, channels)
    if request.action == "show":
        return await _show(key, request.server, channels)
    keys = channels.defaults.keys
    why = refusal(caller, request, keys)
    if why is not None:
        return CommandResult(why, ok=False)
    if request.key not in keys:
        return CommandResult(f"Which setting? {USAGE}" if not request.key else
                             f"There is no setting {request.key!r}. Keys: {', '.join(keys)}.",
                             ok=False)
    server = request.server or keys[request.key].server_only
    where = "this server" if server else "this channel"
    actor = f"{caller.name} ({caller.user_id})" if caller.name != caller.user_id else caller.name
    try:
        if request.action == "unset":
            await channels.put(scope_of(key, server), request.key, None, actor=actor)
            return CommandResult(f"Unset {request.key} for {where}; "
                                 f"{'the default' if server else 'the server or default value'}"
                                 " applies.")
        if not request.value:
            return CommandResult(f"Set {request.key} to what? /config set "
                                 f"{'server ' if server else ''}{request.key} VALUE", ok=False)
        stored = await channels.put(scope_of(key, server), request.key, request.value,
                                    actor=actor)
    except Invalid as e:
        return CommandResult(str(e), ok=False)
    shown = _shown(request.key, stored or "")
    end = "" if shown.endswith((".", "!", "?", "…", "。")) else "."  # no "pirate.."
    return CommandResult(f"Set {request.key} for {where} to {shown}{end}")


async def _show(key: ChannelKey, server: bool, channels: ChannelConfig) -> CommandResult:
    allowed = ", ".join(channels.defaults.allowed_models)
    if server:
        stored = await channels.stored(scope_of(key, True))
        lines = [f"- {n}: {_shown(n, s.value)} (set by {s.updated_by}, {_when(s.updated_at)})"
                 for n, s in stored.items()]
        body = "\n".join(lines) or "(none: every channel uses the operator's defaults)"
        return CommandResult(f"Server-wide settings:\n{body}\nAllowed models: {allowed}")
    effective: ChannelSettings = await channels.get(key)
    lines = []
    for name in channels.defaults.keys:
        value = (",".join(sorted(getattr(effective.access, name))) if name in LIST_NAMES
                 else effective.value(name))
        source = effective.sources.get(name, "default")
        shown = _shown(name, value)
        if name == "model" and channels.defaults.offline:  # say what actually answers
            shown = f"offline (no model configured; {shown} once one is)"
        lines.append(f"- {name}: {shown}  ({source})")
    return CommandResult(
        "Settings in force here (and where each comes from: channel, server or default):\n"
        + "\n".join(lines) + f"\nAllowed models: {allowed}\n"
        "Change one with /config set KEY VALUE (add server for the whole server)."
    )


async def _history(key: ChannelKey, channels: ChannelConfig) -> CommandResult:
    if channels.store is None:
        return CommandResult("No settings have been changed.")
    changes = await channels.store.setting_changes(key, limit=HISTORY_LIMIT)
    if not changes:
        return CommandResult("No settings of this channel or its server have been changed.")
    lines = []
    for c in changes:
        where = "server" if c.scope.channel == SERVER else "channel"
        what = f"unset {c.name}" if c.value is None else f"{c.name} = {_shown(c.name, c.value)}"
        lines.append(f"- {_when(c.at)} · {c.actor} · {where}: {what}")
    return CommandResult("Latest settings changes (newest first):\n" + "\n".join(lines))


async def _usage(key: ChannelKey, caller: Caller, channels: ChannelConfig,
                 quota: Quota) -> CommandResult:
    settings = await channels.get(key)
    used = await quota.usage(key, caller.user_id)

    def line(who: str, account: UsageKey, limit: int, kinds: tuple[str, ...]) -> str:
        counts = used.get(account, {})
        total = sum(counts.values())
        of = f"of {limit:,}" if limit else "(no limit)"
        parts = [f"{KINDS[k]} {counts.get(k, 0):,}" for k in kinds]
        if counts.get(""):
            parts.append(f"not broken down {counts['']:,}")
        return f"- {who}: {total:,} {of} — {' · '.join(parts)}"

    lines = [f"Token usage today ({quota.day()}, UTC; counts reset at 00:00 UTC):"]
    if not caller.is_direct:
        lines.append(line("this server", UsageKey(key.platform, key.workspace),
                          settings.daily_tokens_per_server, tuple(KINDS)))
    lines.append(line("you", UsageKey(key.platform, key.workspace, caller.user_id),
                      settings.daily_tokens_per_user, PERSONAL_KINDS))
    return CommandResult("\n".join(lines))
