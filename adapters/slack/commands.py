"""Slack slash commands: ``/summary [public]``, ``/reset``, ``/remember <text>``, ``/memory``,
``/forget <id or text>``, ``/config …`` (``bot.config_command``), ``/catchup [since] [public]``
and ``/digest …``, all through one handler (``/catchup`` and ``/digest`` delegate to the
service; links: ``catchup.Permalinks``).

Each is acknowledged before it runs (see ``SlackAdapter.register``); its text is read by the
command's parser (``bot.commands``) before anything else, and what it can't read is
answered with the usage sentence. The answer goes to the command's ``response_url``, only
to the caller unless ``/summary public`` (``/catchup … public``, ``/digest now``) asked
otherwise.
``/reset``, ``/forget`` and changing ``/digest`` are for workspace admins/owners and
``SLACK_ADMIN_USER_IDS``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_bolt.async_app import AsyncRespond

from adapters.replies import user_text
from adapters.slack.options import SlackOptions
from adapters.slack.text import format_reply, readable
from adapters.slack.users import UserDirectory
from adapters.slack.web import call
from bot.catchup_command import Where
from bot.citations import Linker, plain_links
from bot.commands.args import Usage
from bot.commands.digest import DigestRequest
from bot.commands.memory import Text
from bot.commands.registry import SPECS
from bot.config_command import Caller, ConfigRequest
from bot.messages import CommandResult
from bot.service import ChatService
from bot.since import CatchupArgs
from memory.models import ChannelKey

__all__ = ["COMMANDS", "RESPONSE_URL_LIMIT", "SlackCommands", "read_command"]

log = logging.getLogger(__name__)

COMMANDS = ("/summary", "/reset", "/remember", "/memory", "/forget", "/config", "/catchup",
            "/digest")
RESPONSE_URL_LIMIT = 5  # Slack accepts at most five posts to one response_url
_ADMINS = "Only workspace admins and owners (or the users in SLACK_ADMIN_USER_IDS) can "
Command = Mapping[str, Any]
Work = Callable[[ChannelKey, Command, Any], Awaitable[CommandResult]]


def read_command(name: str, command: Command) -> tuple[Any, bool]:
    """Slash command ``name``'s arguments from its payload (a ``Usage`` when its text can't
    be read) and whether they ask for an answer in the channel."""
    spec = SPECS[name.removeprefix("/")]
    args = spec.parse(str(command.get("text") or ""))
    return args, not isinstance(args, Usage) and spec.public(args)


class SlackCommands:
    """Runs a slash command's ``ChatService`` call and answers on its ``response_url``."""

    def __init__(self, service: ChatService, options: SlackOptions, users: UserDirectory) -> None:
        self.service, self.options, self.users = service, options, users
        self._work: dict[str, Work] = {
            "/summary": self._summary,
            "/reset": self._reset,
            "/remember": self._remember,
            "/memory": self._memory,
            "/forget": self._forget,
            "/config": self._config,
            "/catchup": self._catchup,
            "/digest": self._digest,
        }
        self.links: Linker = plain_links  # the adapter sets its Permalinks

    async def handle(self, name: str, command: Command, respond: AsyncRespond) -> None:
        """Read command ``name``'s text, then run it; unreadable text answers the usage, a
        failure one friendly sentence (logged)."""
        args, public = read_command(name, command)
        if isinstance(args, Usage):
            await self._respond(respond, args.text, public=False)
            return
        try:
            key = ChannelKey("slack", str(command["team_id"]), str(command["channel_id"]))
            result = await self._work[name](key, command, args)
            text, public = result.text, public and result.ok
        except Exception as e:
            log.exception("%s failed", name)
            text, public = user_text(e), False
        await self._respond(respond, text, public=public)

    async def may_reset(self, user_id: str) -> bool:
        """Listed in ``SLACK_ADMIN_USER_IDS``, or a workspace admin or owner right now."""
        return user_id in self.options.admin_user_ids or await self.users.is_admin(user_id)

    async def _summary(self, key: ChannelKey, command: Command, args: Any) -> CommandResult:
        return await self.service.memory_commands.summary(key, str(command.get("user_id") or ""))

    async def _reset(self, key: ChannelKey, command: Command, args: Any) -> CommandResult:
        allowed = await self.may_reset(str(command["user_id"]))
        refusal = _ADMINS + "reset this channel's memory."
        return await self.service.memory_commands.reset(key, allowed=allowed, refusal=refusal)

    async def _remember(self, key: ChannelKey, command: Command, args: Text) -> CommandResult:
        user = str(command.get("user_id") or "")
        author = (await self.users.names([user]))[user] if user else ""
        text = readable(args.text, self.users.known())
        return await self.service.memory_commands.remember(key, text, author=author)

    async def _memory(self, key: ChannelKey, command: Command, args: Any) -> CommandResult:
        return await self.service.memory_commands.memory_list(key)

    async def _forget(self, key: ChannelKey, command: Command, args: Text) -> CommandResult:
        allowed = await self.may_reset(str(command["user_id"]))
        refusal = _ADMINS + "make me forget facts of this channel."
        return await self.service.memory_commands.forget(key, args.text, allowed=allowed,
                                                         refusal=refusal)

    async def _config(self, key: ChannelKey, command: Command,
                      args: ConfigRequest) -> CommandResult:
        """``/config``: changes need admin/owner or ``SLACK_ADMIN_USER_IDS``; none in a DM."""
        user = str(command.get("user_id") or "")
        admin = await self.may_reset(user) if args.action in ("set", "unset") else False
        name = (await self.users.names([user]))[user] if user else ""
        rule = _ADMINS + "change gistbot's settings."
        caller = Caller(user, name or user, is_direct=key.channel.startswith("D"),
                        may_channel=admin, may_server=admin, channel_rule=rule, server_rule=rule)
        return await self.service.config_command.configure(key, args, caller)

    async def _catchup(self, key: ChannelKey, command: Command,
                       args: CatchupArgs) -> CommandResult:
        where = Where(key, {}, self.links)
        return await self.service.catchup_commands.catchup(where,
                                                           str(command.get("user_id") or ""), args)

    async def _digest(self, key: ChannelKey, command: Command,
                      args: DigestRequest) -> CommandResult:
        user = str(command.get("user_id") or "")
        allowed = await self.may_reset(user)
        return await self.service.catchup_commands.digest(Where(key, {}, self.links), args,
                                                          allowed=allowed,
                                         by=user, refusal=_ADMINS + "manage digests here.")

    async def _respond(self, respond: AsyncRespond, text: str, *, public: bool) -> None:
        kind = "in_channel" if public else "ephemeral"
        for chunk in format_reply(text, self.users.known())[:RESPONSE_URL_LIMIT]:
            r = await call("response_url", respond(text=chunk, response_type=kind))
            if r is None or getattr(r, "status_code", 200) >= 400:
                log.error("posting to response_url failed: %r", getattr(r, "body", r))
                return

