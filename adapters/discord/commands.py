"""Discord's application commands, generated from the command registry
(``bot.commands.registry.COMMANDS``): one command per declared ``Command``, an option per
``Argument`` (a flag a boolean, a choice a fixed list, ``suggest`` autocompleted), the
command hidden from members without its permission when it says so.

Each one reads its options with the command's parser first (``Command.read_options``):
what it can't read is answered privately with the usage sentence. Otherwise it is
acknowledged at once ("thinking…", so Discord's 3-second limit cannot be hit), runs the
command for the channel (``adapters.discord.context``) and answers the caller, or the
channel when the arguments ask for it and the caller may.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Literal

import discord
from discord import app_commands

from adapters.discord.answer import ORIGINAL, InteractionAnswer, answer_post
from adapters.discord.context import DiscordContext, discord_permission
from adapters.discord.text import NO_PINGS, channel_key, plan_reply, text_file
from adapters.replies import user_text
from bot.platform import (
    COMMANDS,
    Argument,
    ChannelKey,
    Command,
    CommandResult,
    Features,
    Registry,
    Usage,
    looked_up,
)

__all__ = ["TEXT_OPTION", "add_commands", "answer_usage", "app_command", "interaction_key",
           "read_options"]

log = logging.getLogger(__name__)
ANSWERED_PRIVATELY = "(answered privately)"
MAX_CHOICES = 25  # Discord shows at most 25 suggestions
Work = Callable[[ChannelKey], Awaitable[CommandResult]]
Invoke = Callable[[discord.Interaction, Command[Any], dict[str, Any]], Awaitable[None]]
# the option whose text a command's grammar reads, for commands read that way
TEXT_OPTION = {c.name: a.name for c in COMMANDS if c.from_options is None
               for a in c.arguments if a.kind == "text"}


def read_options(name: str, options: Mapping[str, Any], commands: Registry = COMMANDS) -> Any:
    """Command ``name``'s options read by its parser: the arguments, or a ``Usage``."""
    command = commands.get(name)
    if command is None:
        return Usage(f"I don't know /{name[:40]}.")
    return command.read_options(options)


async def answer_usage(interaction: discord.Interaction, name: str, usage: Usage) -> None:
    """Answer unreadable options with the usage sentence, only to the caller."""

    async def work(key: ChannelKey) -> CommandResult:
        return CommandResult(usage.text, ok=False)

    await run_command(interaction, name, work)


def interaction_key(interaction: discord.Interaction) -> ChannelKey:
    """The memory key of the channel a command was used in."""
    return channel_key(interaction.guild_id, interaction.channel_id or 0)


def _parameter(arg: Argument) -> inspect.Parameter:
    annotation: Any = str
    default: Any = inspect.Parameter.empty if arg.required else ""
    if arg.kind == "flag":
        annotation, default = bool, False
    elif arg.kind == "choice":
        annotation = Literal[arg.choices]  # a fixed list in Discord's picker
        default = inspect.Parameter.empty if arg.required else arg.choices[0]
    return inspect.Parameter(arg.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)


Suggestions = Callable[[discord.Interaction, str],
                      Coroutine[Any, Any, list[app_commands.Choice[str]]]]


def _suggester(command: Command[Any], arg: Argument, features: Features,
               commands: Registry) -> Suggestions:
    suggest = arg.suggest
    assert suggest is not None

    async def complete(interaction: discord.Interaction,
                       current: str) -> list[app_commands.Choice[str]]:
        typed = {a.name: str(getattr(interaction.namespace, a.name, "") or "")
                 for a in command.arguments}
        offered = [o for o in suggest(features, commands, typed) if current.lower() in o.lower()]
        return [app_commands.Choice(name=o[:100], value=o[:100]) for o in offered[:MAX_CHOICES]]

    return complete


def app_command(command: Command[Any], invoke: Invoke, features: Features,
                commands: Registry, moderate: str) -> app_commands.Command[Any, ..., None]:
    """``command`` as a discord.py application command whose callback hands its options to
    ``invoke``. discord.py reads a command's options from its callback's signature, so the
    signature is built from the declared arguments."""

    async def callback(interaction: discord.Interaction, **options: Any) -> None:
        await invoke(interaction, command, options)

    first = inspect.Parameter("interaction", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              annotation=discord.Interaction)
    callback.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [first, *(_parameter(a) for a in command.arguments)])
    if command.arguments:
        app_commands.describe(**{a.name: a.description for a in command.arguments})(callback)
    suggested = {a.name: _suggester(command, a, features, commands)
                 for a in command.arguments if a.suggest is not None}
    if suggested:
        app_commands.autocomplete(**suggested)(callback)
    made: app_commands.Command[Any, ..., None] = app_commands.Command(
        name=command.name, description=command.description, callback=callback)
    flag = discord_permission(command.permission, moderate)
    if command.hidden and flag:
        made.default_permissions = discord.Permissions(**{flag: True})
    return made


def add_commands(tree: app_commands.CommandTree[Any], features: Features,
                 reset_permission: str, commands: Registry = COMMANDS, *,
                 timeout: float = 30.0) -> None:
    """Register every command of ``commands`` on ``tree`` (``timeout``: seconds a public
    answer may take before its outcome is unknown)."""
    moderate = reset_permission

    async def invoke(interaction: discord.Interaction, command: Command[Any],
                     values: dict[str, Any]) -> None:
        args = command.read_options(values)
        if isinstance(args, Usage):
            return await answer_usage(interaction, command.name, args)
        ctx = DiscordContext(interaction, features, commands, moderate)
        public = command.spec.public(args) and await ctx.may(command.permission)
        await run_command(interaction, command.name,
                          lambda _key: command.respond(ctx, args, public=public),
                          ephemeral=not public, post_timeout=timeout)

    for command in commands:
        tree.add_command(app_command(command, invoke, features, commands, moderate))
    answer_unreadable_options(tree, commands)


def answer_unreadable_options(tree: app_commands.CommandTree[Any], commands: Registry) -> None:
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
        command = commands.get(name)
        text = f"I can't read those options. {command.spec.usage if command else ''}".strip()
        if interaction.response.is_done():
            return None
        try:
            await interaction.response.send_message(text, ephemeral=True,
                                                    allowed_mentions=NO_PINGS)
        except discord.HTTPException:
            log.warning("could not answer /%s with its usage", name)
        return None


async def run_command(interaction: discord.Interaction, name: str, work: Work, *,
                      ephemeral: bool = True, post_timeout: float = 30.0) -> None:
    """Defer, run ``work`` for the channel, answer (errors: one friendly sentence, logged).
    A command asked for in public that did not succeed (a quota notice, a bad argument) is
    answered to the caller only, as on Slack. A public answer goes into the deferred
    response itself (``adapters.discord.answer``: shown exactly once, whatever fails)."""
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
    elif ephemeral:
        await _followup(interaction, text, ephemeral=True)
    else:
        await _publicly(interaction, text, post_timeout)


async def _publicly(interaction: discord.Interaction, text: str, within: float) -> None:
    """Put the answer into the public deferral: an edit, repeated while its outcome is
    unknown (the same text into the same message shows it once)."""
    outlet = looked_up(InteractionAnswer(interaction, timeout=within))
    if not await outlet.edit(answer_post(interaction, text), ORIGINAL):
        log.error("could not answer /%s in public", interaction.command and
                  interaction.command.name)


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
