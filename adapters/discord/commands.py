"""The slash commands: ``/summary``, ``/reset``, ``/remember``, ``/memory`` (ephemeral) and
``/forget`` (the same permission as ``/reset``).

Each one is acknowledged at once ("thinking…", so Discord's 3-second limit cannot be hit),
runs one ``ChatService`` call for the channel and answers the caller (``/summary public``
answers the channel).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import discord
from discord import app_commands

from adapters.discord.catchup import add_catchup_commands
from adapters.discord.config import add_config_command
from adapters.discord.options import DiscordOptions
from adapters.discord.text import NO_PINGS, channel_key, plan_reply, text_file
from adapters.replies import user_text
from bot.messages import CommandResult
from bot.service import ChatService
from memory.models import ChannelKey

__all__ = ["add_commands", "interaction_key", "may_reset"]

log = logging.getLogger(__name__)
ANSWERED_PRIVATELY = "(answered privately)"
Work = Callable[[ChannelKey], Awaitable[CommandResult]]


def interaction_key(interaction: discord.Interaction) -> ChannelKey:
    """The memory key of the channel a command was used in."""
    return channel_key(interaction.guild_id, interaction.channel_id or 0)


def may_reset(interaction: discord.Interaction, permission: str) -> tuple[bool, str]:
    """Whether the caller may ``/reset`` (and ``/forget``) here, and the refusal text."""
    perms = interaction.permissions
    allowed = (interaction.guild_id is None or perms.administrator
               or bool(getattr(perms, permission)))
    perm = permission.replace("_", " ").title()
    return allowed, f"You need the {perm} permission to reset this channel's memory."


def add_commands(tree: app_commands.CommandTree[Any], service: ChatService,
                 options: DiscordOptions) -> None:
    """Register gistbot's slash commands on ``tree``."""
    permission = options.reset_permission

    @app_commands.command(name="summary",
                          description="What this channel has talked about, as I remember it")
    @app_commands.describe(public="Show it to everyone here (default: only you)")
    async def summary(interaction: discord.Interaction, public: bool = False) -> None:
        await run_command(interaction, "summary", lambda key: service.summary(
            key, str(interaction.user.id)), ephemeral=not public)

    @app_commands.command(name="reset", description="Forget this channel's conversation")
    async def reset(interaction: discord.Interaction) -> None:
        allowed, refusal = may_reset(interaction, permission)
        await run_command(interaction, "reset", lambda key: service.reset(
            key, allowed=allowed, refusal=refusal))

    @app_commands.command(name="remember", description="Pin a fact for this channel")
    @app_commands.describe(text="What to remember")
    async def remember(interaction: discord.Interaction, text: str) -> None:
        await run_command(interaction, "remember", lambda key: service.remember(
            key, text, author=interaction.user.display_name))

    @app_commands.command(name="memory",
                          description="The facts I keep for this channel (only you see it)")
    async def memory(interaction: discord.Interaction) -> None:
        await run_command(interaction, "memory", service.memory_list)

    @app_commands.command(name="forget", description="Forget one fact of this channel")
    @app_commands.describe(fact="The fact's id (see /memory) or its text")
    async def forget(interaction: discord.Interaction, fact: str) -> None:
        allowed, refusal = may_reset(interaction, permission)
        await run_command(interaction, "forget", lambda key: service.forget(
            key, fact, allowed=allowed, refusal=refusal.replace("reset", "change")))

    needed = discord.Permissions(**{permission: True})
    reset.default_permissions = needed
    forget.default_permissions = needed
    tree.add_command(summary)
    tree.add_command(reset)
    tree.add_command(remember)
    tree.add_command(memory)
    tree.add_command(forget)
    add_config_command(tree, service)  # /config: adapters.discord.config
    add_catchup_commands(tree, service)  # /catchup, /digest (adapters/discord/catchup.py)


async def run_command(interaction: discord.Interaction, name: str, work: Work, *,
                      ephemeral: bool = True) -> None:
    """Defer, run ``work`` for the channel, answer (errors: one friendly sentence, logged).
    A command asked for in public that did not succeed (a quota notice, a bad argument) is
    answered to the caller only, as on Slack."""
    if not await _defer(interaction, ephemeral=ephemeral):
        return
    try:
        result = await work(interaction_key(interaction))
        text, privately = result.text, not result.ok and not ephemeral
    except Exception as e:
        log.exception("/%s failed", name)
        text, privately = user_text(e), False
    if privately:
        await _privately(interaction, text)
    else:
        await _followup(interaction, text, ephemeral=ephemeral)


async def _privately(interaction: discord.Interaction, text: str) -> None:
    """Answer a publicly deferred command to the caller only. The first follow-up after a
    deferral takes the deferral's visibility, so the loading message is resolved with a
    neutral line first, the answer follows ephemerally, and the line is deleted."""
    try:
        await interaction.edit_original_response(content=ANSWERED_PRIVATELY)
    except discord.HTTPException:
        log.exception("could not resolve a deferred slash command")
        return
    await _followup(interaction, text, ephemeral=True)
    try:
        await interaction.delete_original_response()
    except discord.HTTPException:
        log.warning("could not delete the placeholder of a slash command", exc_info=True)


async def _defer(interaction: discord.Interaction, *, ephemeral: bool) -> bool:
    """Acknowledge at once ("thinking…"), so Discord's 3-second limit cannot be hit."""
    try:
        await interaction.response.defer(ephemeral=ephemeral, thinking=True)
        return True
    except discord.HTTPException:
        log.exception("could not acknowledge /%s in time", interaction.command and
                      interaction.command.name)
        return False


async def _followup(interaction: discord.Interaction, text: str, *, ephemeral: bool) -> None:
    plan = plan_reply(text)
    try:
        for i, chunk in enumerate(plan.messages):
            kwargs: dict[str, Any] = {"ephemeral": ephemeral, "allowed_mentions": NO_PINGS}
            if plan.attachment and i == len(plan.messages) - 1:
                kwargs["file"] = text_file(plan.attachment)
            await interaction.followup.send(chunk, **kwargs)
    except discord.HTTPException:
        log.exception("could not answer a slash command")
