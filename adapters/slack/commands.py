"""Slack's slash commands, generated from the command registry
(``bot.commands.registry.COMMANDS``; the manifest's entries: ``adapters.slack.manifest``),
all through one handler.

Each is acknowledged before it runs (see ``SlackAdapter.register``); its text is read by the
command's parser before anything else, and what it can't read is answered with the usage
sentence. The answer goes to the command's ``response_url``, only to the caller unless the
arguments ask for the channel (``/summary public``, ``/catchup … public``, ``/digest now``)
and the command did its work; an answer in the channel goes through the outbox (its
``trigger_id`` names it), so one whose outcome is unknown is looked up before it is sent
again, and no answer is repeated blind. A command that shows the channel's memory answers
only a member of the conversation (``adapters.slack.access``). Every permission a command
needs (``/reset``, ``/forget``, changing ``/digest`` or ``/config``) is for workspace
admins/owners and ``SLACK_ADMIN_USER_IDS``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_bolt.async_app import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from adapters.replies import user_text
from adapters.slack.access import ConversationAudience, SlackMember
from adapters.slack.outlet import AnswerPosts
from adapters.slack.text import format_reply, readable
from adapters.slack.users import UserDirectory
from adapters.slack.web import respond_once, webhook_client
from bot.platform import COMMANDS as REGISTRY
from bot.platform import (
    Access,
    ChannelKey,
    Features,
    Linker,
    OutcomeUnknown,
    Permission,
    Post,
    Registry,
    SlackSettings,
    Usage,
    Where,
    answer_id,
    plain_links,
)

__all__ = ["COMMANDS", "RESPONSE_URL_LIMIT", "SlackCommands", "SlackContext", "read_command"]

log = logging.getLogger(__name__)

COMMANDS = tuple(f"/{name}" for name in REGISTRY.names())
RESPONSE_URL_LIMIT = 5  # Slack accepts at most five posts to one response_url
LONG_POST = 12_000  # a post when five of MESSAGE_LIMIT are too few (Slack cuts text at 40,000)
ADMINS = "workspace admins and owners (or the users in SLACK_ADMIN_USER_IDS)"
Command = Mapping[str, Any]


def read_command(name: str, command: Command,
                 commands: Registry = REGISTRY) -> tuple[Any, bool]:
    """Slash command ``name``'s arguments from its payload (a ``Usage`` when its text can't
    be read) and whether they ask for an answer in the channel."""
    declared = commands.get(name)
    if declared is None:
        return Usage(f"I don't know {name[:40]}."), False
    args = declared.spec.parse(str(command.get("text") or ""))
    return args, not isinstance(args, Usage) and declared.spec.public(args)


class SlackContext:
    """One slash command, as a running command sees it (``bot.commands.declare.Context``)."""

    def __init__(self, slack: SlackCommands, command: Command) -> None:
        self.slack, self.features, self.commands = slack, slack.features, slack.commands
        self.key = ChannelKey("slack", str(command["team_id"]), str(command["channel_id"]))
        self.user_id = str(command.get("user_id") or "")
        self.is_direct = self.key.channel.startswith("D")
        self.roles: tuple[str, ...] | None = None  # Slack has no roles (user groups aren't)
        self.parent = ""  # a Slack thread is in its channel already
        self._admin: bool | None = None  # asked once per command, fresh each command
        self._reader = SlackMember(slack.users.client, self.user_id)

    async def user_name(self) -> str:
        users = self.slack.users
        return (await users.names([self.user_id]))[self.user_id] if self.user_id else ""

    def reader(self) -> Access:
        return self._reader

    def everyone(self) -> Access:
        return ConversationAudience(self.key)

    async def where(self) -> Where:
        info = await self.slack.users.info(self.user_id) if self.user_id else None
        locale = info.get("locale") if info else None  # how they write dates (en-US, de-DE)
        return Where(self.key, {}, self.slack.links, reader=self.reader(),
                     locale=locale if isinstance(locale, str) else None,
                     everyone=self.everyone())

    async def may(self, permission: Permission) -> bool:
        if permission is Permission.EVERYONE:
            return True
        if self._admin is None:  # a payload without a user (crafted) is nobody's
            self._admin = bool(self.user_id) and await self.slack.may_reset(self.user_id)
        return self._admin

    def refusal(self, permission: Permission, action: str) -> str:
        return f"Only {ADMINS} can {action}."

    def who(self, permission: Permission) -> str:
        return "anyone" if permission is Permission.EVERYONE else ADMINS

    def readable(self, text: str) -> str:
        return readable(text, self.slack.users.known())


class SlackCommands:
    """Runs a slash command of ``commands`` and answers on its ``response_url``."""

    def __init__(self, features: Features, settings: SlackSettings, users: UserDirectory,
                 commands: Registry = REGISTRY, *, client: AsyncWebClient | None = None,
                 timeout: float = 30.0) -> None:
        self.features, self.settings, self.users = features, settings, users
        self.commands = commands
        self.client = client or users.client  # reads the channel back to find an answer
        self.timeout = timeout  # seconds a response_url post may take
        self.links: Linker = plain_links  # the adapter sets its Permalinks

    async def handle(self, name: str, command: Command, respond: AsyncRespond) -> None:
        """Read command ``name``'s text, then run it; unreadable text answers the usage, a
        failure one friendly sentence (logged)."""
        args, public = read_command(name, command, self.commands)
        declared = self.commands.get(name)
        if isinstance(args, Usage) or declared is None:
            await self._respond(respond, getattr(args, "text", ""), public=False,
                                command=command)
            return
        try:
            result = await declared.respond(SlackContext(self, command), args, public=public)
            text, public = result.text, public and result.ok
        except Exception as e:
            log.exception("%s failed", name)
            text, public = user_text(e), False
        await self._respond(respond, text, public=public, command=command)

    async def may_reset(self, user_id: str) -> bool:
        """Listed in ``SLACK_ADMIN_USER_IDS``, or a workspace admin or owner right now."""
        return (user_id in self.settings.slack_admin_user_ids
                or await self.users.is_admin(user_id))

    async def _respond(self, respond: AsyncRespond, text: str, *, public: bool,
                       command: Command) -> None:
        """Post the answer's chunks to the ``response_url``: in the channel through the
        outbox, named by the command's ``trigger_id``; to the caller only once each."""
        chunks = format_reply(text, self.users.known())
        if len(chunks) > RESPONSE_URL_LIMIT:  # fewer, longer posts rather than a cut answer
            chunks = format_reply(text, self.users.known(), limit=LONG_POST)
        chunks = chunks[:RESPONSE_URL_LIMIT]
        url = str(command.get("response_url") or "")
        trigger = str(command.get("trigger_id") or "")
        try:
            if not url:  # nothing to post to but what bolt offers
                await self._through(respond, chunks, public=public)
            elif public and trigger:
                await self._in_channel(url, trigger, command, chunks)
            else:
                await self._to_caller(url, chunks, public=public)
        except Exception:
            log.exception("posting to response_url failed")

    async def _through(self, respond: AsyncRespond, chunks: list[str], *,
                       public: bool) -> None:
        kind = "in_channel" if public else "ephemeral"
        for chunk in chunks:
            r = await respond(text=chunk, response_type=kind)
            if getattr(r, "status_code", 200) >= 400:
                log.error("posting to response_url failed: %r", getattr(r, "body", r))
                return

    async def _in_channel(self, url: str, trigger: str, command: Command,
                          chunks: list[str]) -> None:
        key = ChannelKey("slack", str(command["team_id"]), str(command["channel_id"]))
        posts = AnswerPosts(self.client, url, timeout=self.timeout)
        for i, chunk in enumerate(chunks):
            if await self.features.outbox.send(posts, Post(key, answer_id(key, trigger, i),
                                                           chunk)) is None:
                log.error("posting an answer in %s failed", key)
                return

    async def _to_caller(self, url: str, chunks: list[str], *, public: bool) -> None:
        hook = webhook_client(url, timeout=self.timeout)
        kind = "in_channel" if public else "ephemeral"
        for chunk in chunks:
            try:
                if not await respond_once("response_url", hook.send(text=chunk,
                                                                     response_type=kind)):
                    return
            except OutcomeUnknown:
                log.warning("an answer may not have arrived; it is not sent again")
                return
