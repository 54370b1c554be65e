"""What the composition root (``bot.app``) hands the platforms and the commands: the
message pipeline (``ChatService``) and, beside it, each part they use, so nobody reaches
through the service for them.

The commands read it as their ``bot.commands.declare.CommandService`` (the settings, the
access lists, the memory, config and catch-up commands); an adapter takes the outbox for
its ``ReplyFlow``, registers its file source with the attachments and its digest outlet
with the catch-up, tells the observers when it connects, and sweeps the owed replies
(``bot.missed.sweep``).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.access import AccessRules
from bot.attachments.intake import AttachmentIntake
from bot.catchup.wiring import CatchupCommands
from bot.channels.config import ChannelConfig
from bot.channels.config_command import ConfigCommand
from bot.channels.quota import Quota
from bot.conversation.hooks import NO_HOOKS, FeatureSet
from bot.conversation.outbox import Outbox
from bot.conversation.service import ChatService
from bot.memory_commands.feature import MemoryCommands
from bot.missed.owed import OwedReplies
from bot.ops.observe import Observers

__all__ = ["Features"]


@dataclass(frozen=True, slots=True)
class Features:
    """The pipeline and the parts beside it, each built once (``bot.app``)."""

    service: ChatService
    channels: ChannelConfig
    quota: Quota
    access: AccessRules
    outbox: Outbox
    attachments: AttachmentIntake
    observers: Observers
    owed: OwedReplies | None
    memory_commands: MemoryCommands
    config_command: ConfigCommand
    catchup_commands: CatchupCommands
    running: FeatureSet = NO_HOOKS  # the features' objects, for their commands (bot.features)
