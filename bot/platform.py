"""The adapters' port: everything a platform adapter may use of ``bot``, and nothing else.

An adapter translates a platform's events into an ``IncomingMessage``, hands it to the
``ChatService`` once (``Features.service``; the parts beside it are handed over in
``Features``, never reached through it), and delivers what comes back through a
``ReplyFlow`` and its own outlet (``Post``, the ``Outbox``); it builds its command table
from ``COMMANDS`` and answers with ``user_text`` for an error. Adapters import from this
module only (the layout test counts), so what the application offers a platform is read
in one place, and a change behind it does not reach into three adapter packages.
"""

from __future__ import annotations

from bot.access import Verdict
from bot.arguments import Usage
from bot.attachments import FileSource
from bot.catchup.citations import Linker, plain_links
from bot.catchup.command import Where
from bot.catchup.phrases import posix_locale
from bot.commands.declare import Argument, Command, Permission, Registry
from bot.conversation.lookup import looked_up
from bot.conversation.outbox import Outbox, Post, answer_id, digest_id
from bot.conversation.reply_flow import ReplyFlow
from bot.conversation.service import ChatService
from bot.conversation.sweep import answer_missed_mentions, stop_answering_missed
from bot.errors import ConfigError, GistbotError, OutcomeUnknown, PlatformUnreachable, user_text
from bot.extras import Extra, require
from bot.features.registry import COMMANDS
from bot.messages import (
    Attachment,
    ChainLink,
    ChainSource,
    CommandResult,
    IncomingMessage,
    PendingReply,
    Refresh,
    Viewing,
)
from bot.ops.logs import LiveLine
from bot.ops.shutdown import SHUTDOWN_APOLOGY, reply_grace
from bot.parts import Features
from bot.plugins import Launch, Platform
from bot.read_check import OPEN, Access, refusal
from bot.settings import Settings
from bot.settings.sections import ChatSettings, DiscordSettings, SlackSettings
from bot.wording import plural
from memory.errors import StoreError
from memory.models import ChannelKey, Turn

__all__ = [
    "COMMANDS", "OPEN", "SHUTDOWN_APOLOGY", "Access", "Argument", "Attachment", "ChainLink",
    "ChainSource", "ChannelKey", "ChatService", "ChatSettings", "Command", "CommandResult",
    "ConfigError", "DiscordSettings", "Extra", "Features", "FileSource", "GistbotError",
    "IncomingMessage",
    "Launch", "Linker", "LiveLine", "Outbox", "OutcomeUnknown", "PendingReply", "Permission",
    "Platform", "PlatformUnreachable", "Post", "Refresh", "Registry", "ReplyFlow", "Settings",
    "SlackSettings", "StoreError", "Turn", "Usage", "Verdict", "Viewing", "Where", "answer_id",
    "answer_missed_mentions", "digest_id", "looked_up", "plain_links", "plural", "posix_locale",
    "refusal", "reply_grace", "require", "stop_answering_missed", "user_text",
]
