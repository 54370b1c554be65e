"""Discord's ``/config``: options ``action`` (show, set, unset, history, usage), ``key``
and ``value`` (both autocompleted: the setting names, then the allowed models or a key's
choices) and ``scope`` (channel or server). Answered to the caller only.

Who may change settings (``rights``): Manage Channels (or Administrator) for a channel's,
Manage Server (or Administrator) for the server's; nobody in a direct message.
"""

from __future__ import annotations

from typing import Any, Literal

import discord
from discord import app_commands

from bot.channel_config import KEYS
from bot.commands.args import Usage
from bot.config_command import Caller
from bot.service import ChatService

__all__ = ["add_config_command", "caller_of", "rights"]

MAX_CHOICES = 25  # Discord shows at most 25 suggestions


def rights(in_guild: bool, perms: discord.Permissions) -> tuple[bool, bool]:
    """(may change this channel's settings, may change the server's)."""
    if not in_guild:
        return False, False
    admin = perms.administrator
    return admin or perms.manage_channels, admin or perms.manage_guild


def caller_of(interaction: discord.Interaction) -> Caller:
    """The person running ``/config`` and what their permissions let them change."""
    in_guild = interaction.guild_id is not None
    may_channel, may_server = rights(in_guild, interaction.permissions)
    user = interaction.user
    return Caller(
        str(user.id), user.display_name, is_direct=not in_guild, may_channel=may_channel,
        may_server=may_server,
        channel_rule="You need the Manage Channels permission to change this channel's settings.",
        server_rule="You need the Manage Server permission to change this server's settings.",
    )


def add_config_command(tree: app_commands.CommandTree[Any], service: ChatService) -> None:
    """Register ``/config`` on ``tree``."""
    # the shared parse, defer and answer path
    from adapters.discord.commands import answer_usage, read_options, run_command

    async def keys(interaction: discord.Interaction,
                   current: str) -> list[app_commands.Choice[str]]:
        names = [k for k in KEYS if current.lower() in k]
        return [app_commands.Choice(name=k, value=k) for k in names[:MAX_CHOICES]]

    async def values(interaction: discord.Interaction,
                     current: str) -> list[app_commands.Choice[str]]:
        key = str(getattr(interaction.namespace, "key", "") or "")
        if key in ("model", "summary_model"):
            options = list(service.channels.defaults.allowed_models)
        elif key in KEYS:
            options = list(KEYS[key].choices)
        else:
            options = []
        picked = [o for o in options if current.lower() in o.lower()][:MAX_CHOICES]
        return [app_commands.Choice(name=o[:100], value=o[:100]) for o in picked]

    @app_commands.command(name="config",
                          description="Show or change this channel's settings (only you see it)")
    @app_commands.describe(action="show (default), set, unset, history or usage",
                           key="Which setting", value="The new value (for set)",
                           scope="This channel (default) or the whole server")
    @app_commands.autocomplete(key=keys, value=values)
    async def config(
        interaction: discord.Interaction,
        action: Literal["show", "set", "unset", "history", "usage"] = "show",
        key: str = "",
        value: str = "",
        scope: Literal["channel", "server"] = "channel",
    ) -> None:
        request = read_options("config", {"action": action, "key": key, "value": value,
                                          "scope": scope})
        if isinstance(request, Usage):
            return await answer_usage(interaction, "config", request)
        caller = caller_of(interaction)
        await run_command(interaction, "config",
                          lambda where: service.config_command.configure(where, request, caller))

    tree.add_command(config)
