"""The slash commands: ``/summary``, ``/reset``, ``/remember``, ``/memory`` (ephemeral) and
``/forget`` (the same permission as ``/reset``).

Each one reads its options with the command's parser first (``read_options``;
``bot.commands``): what it can't read is answered privately with the usage sentence.
Otherwise it is acknowledged at once ("thinking…", so Discord's 3-second limit cannot be
hit), runs one ``ChatService`` call for the channel and answers the caller (``/summary
public`` answers the channel).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import discord
from discord import app_commands

from adapters.discord.catchup import add_catchup_commands
from adapters.discord.config import add_config_command
from adapters.discord.options import DiscordOptions
from adapters.discord.text import NO_PINGS, channel_key, plan_reply, text_file
from adapters.replies import user_text
from bot.commands.args import Usage
from bot.commands.config import config_fields
from bot.commands.memory import SummaryArgs
from bot.commands.registry import SPECS
from bot.messages import CommandResult
from bot.service import ChatService
from memory.models import ChannelKey

__all__ = ["add_commands", "answer_usage", "interaction_key", "may_reset", "read_options"]

log = logging.getLogger(__name__)
ANSWERED_PRIVATELY = "(answered privately)"
Work = Callable[[ChannelKey], Awaitable[CommandResult]]
TEXT_OPTION = {"catchup": "since", "digest": "schedule", "remember": "text", "forget": "fact"}


def read_options(name: str, options: Mapping[str, Any]) -> Any:
    """Command ``name``'s options read by its parser: the arguments, or a ``Usage``.

    A text option goes through the command's text grammar (``/catchup``'s ``public``
    option or word asks for a public answer); ``/config``'s fields are checked alike.
    """
    if name == "config":
        return config_fields(str(options.get("action") or "show"), str(options.get("key") or ""),
                             str(options.get("value") or ""), options.get("scope") == "server")
    if name == "summary":
        return SummaryArgs(bool(options.get("public")))
    args = SPECS[name].parse(str(options.get(TEXT_OPTION.get(name, ""), "") or ""))
    if name == "catchup" and options.get("public") and not isinstance(args, Usage):
        args = dataclasses.replace(args, public=True)
    return args


async def answer_usage(interaction: discord.Interaction, name: str, usage: Usage) -> None:
    """Answer unreadable options with the usage sentence, only to the caller."""

    async def work(key: ChannelKey) -> CommandResult:
        return CommandResult(usage.text, ok=False)

    await run_command(interaction, name, work)


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
        args = read_options("summary", {"public": public})
        await run_command(interaction, "summary", lambda key: service.memory_commands.summary(
            key, str(interaction.user.id)), ephemeral=not args.public)

    @app_commands.command(name="reset", description="Forget this channel's conversation")
    async def reset(interaction: discord.Interaction) -> None:
        allowed, refusal = may_reset(interaction, permission)
        await run_command(interaction, "reset", lambda key: service.memory_commands.reset(
            key, allowed=allowed, refusal=refusal))

    @app_commands.command(name="remember", description="Pin a fact for this channel")
    @app_commands.describe(text="What to remember")
    async def remember(interaction: discord.Interaction, text: str) -> None:
        args = read_options("remember", {"text": text})
        if isinstance(args, Usage):
            return await answer_usage(interaction, "remember", args)
        await run_command(interaction, "remember", lambda key: service.memory_commands.remember(
            key, args.text, author=interaction.user.display_name))

    @app_commands.command(name="memory",
                          description="The facts I keep for this channel (only you see it)")
    async def memory(interaction: discord.Interaction) -> None:
        await run_command(interaction, "memory", service.memory_commands.memory_list)

    @app_commands.command(name="forget", description="Forget one fact of this channel")
    @app_commands.describe(fact="The fact's id (see /memory) or its text")
    async def forget(interaction: discord.Interaction, fact: str) -> None:
        args = read_options("forget", {"fact": fact})
        if isinstance(args, Usage):
            return await answer_usage(interaction, "forget", args)
        allowed, refusal = may_reset(interaction, permission)
        await run_command(interaction, "forget", lambda key: service.memory_commands.forget(
            key, args.text, allowed=allowed, refusal=refusal.replace("reset", "change")))

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
    answer_unreadable_options(tree)


def answer_unreadable_options(tree: app_commands.CommandTree[Any]) -> None:
    """Options discord.py itself can't read (a required one missing, a value of the wrong
    type: a stale command registration or a crafted payload) get the command's usage
    sentence, privately, instead of an unanswered command and a logged traceback."""
    default = tree.on_error

    @tree.error
    async def on_error(interaction: discord.Interaction,
                       error: app_commands.AppCommandError) -> None:
        if not isinstance(error, app_commands.TransformerError
                          | app_commands.CommandSignatureMismatch):
            return await default(interaction, error)
        name = interaction.command.name if interaction.command else ""
        log.warning("/%s: options that could not be read (%s)", name, type(error).__name__)
        spec = SPECS.get(name)
        text = f"I can't read those options. {spec.usage if spec else ''}".strip()
        if interaction.response.is_done():
            return None
        try:
            await interaction.response.send_message(text, ephemeral=True,
                                                    allowed_mentions=NO_PINGS)
        except discord.HTTPException:
            log.warning("could not answer /%s with its usage", name)
        return None


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
