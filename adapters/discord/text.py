"""The Discord adapter's pure half: a Discord message in (``to_incoming``: readable
mentions, noted files), sized messages out (``plan_reply``).

Nothing here touches the network; the string helpers need no discord.py object at all.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import discord

from adapters.chunking import split_parts
from adapters.discord.access import reads_history
from adapters.discord.files import attachments_of
from bot.platform import ChannelKey, IncomingMessage

__all__ = [
    "MAX_MESSAGES",
    "MESSAGE_LIMIT",
    "NO_PINGS",
    "ReplyPlan",
    "channel_key",
    "message_text",
    "note_files",
    "parent_of",
    "plan_reply",
    "preview",
    "render_mentions",
    "role_ids",
    "text_file",
    "to_incoming",
]

MESSAGE_LIMIT = 2000  # Discord's limit on message content, in code points
MAX_MESSAGES = 4  # beyond this many messages, the rest of a reply goes as a .txt file
NO_PINGS = discord.AllowedMentions.none()  # on every send: model output never pings anyone

_CHAT_TYPES = (discord.MessageType.default, discord.MessageType.reply)
_TOKEN = re.compile(r"<(@!?|@&|#)(\d+)>|<a?:(\w+):\d+>")


def render_mentions(
    content: str,
    *,
    users: Mapping[int, str],
    roles: Mapping[int, str],
    channels: Mapping[int, str],
) -> str:
    """Replace ``<@id>``/``<@!id>``, ``<@&id>``, ``<#id>`` and custom emoji with readable
    ``@name``, ``@role``, ``#channel`` and ``:emoji:`` (unknown ids get a generic name)."""

    def sub(m: re.Match[str]) -> str:
        kind, ident, emoji = m.group(1), m.group(2), m.group(3)
        if emoji is not None:
            return f":{emoji}:"
        key = int(ident)
        if kind == "#":
            return "#" + channels.get(key, "unknown-channel")
        if kind == "@&":
            return "@" + roles.get(key, "unknown-role")
        return "@" + users.get(key, "unknown-user")

    return _TOKEN.sub(sub, content)


def note_files(kind: str, names: Iterable[str]) -> list[str]:
    """``[attachment: name]`` lines, one per file."""
    return [f"[{kind}: {name}]" for name in names]


def channel_key(guild_id: int | None, channel_id: int) -> ChannelKey:
    """The memory key of a Discord channel or thread (``"dm"`` for direct messages)."""
    return ChannelKey("discord", str(guild_id) if guild_id else "dm", str(channel_id))


def _mentions_bot(message: discord.Message, bot_user_id: int) -> bool:
    if bot_user_id in message.raw_mentions:
        return True
    # Members often pick the bot's managed role from the @ menu instead of the bot itself.
    return any(r.tags is not None and r.tags.bot_id == bot_user_id for r in message.role_mentions)


def _replies_to(message: discord.Message, user_id: int) -> bool:
    """Whether ``message`` is a reply to a message of ``user_id`` (a forward of one is not:
    its reference names the forwarded message, but nobody addressed its author)."""
    ref = message.reference
    if ref is None or ref.type is not discord.MessageReferenceType.reply:
        return False
    target = ref.resolved if isinstance(ref.resolved, discord.Message) else ref.cached_message
    return target is not None and target.author.id == user_id


def role_ids(author: discord.abc.User) -> tuple[str, ...]:
    """The author's role ids in the server (@everyone's is the server's id); none in a DM."""
    if isinstance(author, discord.Member):
        return tuple(str(r.id) for r in author.roles)
    return ()


def parent_of(channel: object) -> str:
    """The id of the channel a thread is in ("" for anything else)."""
    if isinstance(channel, discord.Thread) and channel.parent_id:
        return str(channel.parent_id)
    return ""


def message_text(message: discord.Message) -> str:
    """The message as the bot stores it: mentions by name, files and stickers noted."""
    text = render_mentions(
        message.content,
        users={u.id: u.display_name for u in message.mentions},
        roles={r.id: r.name for r in message.role_mentions},
        channels={c.id: c.name for c in message.channel_mentions},
    )
    lines = [text] if text.strip() else []
    for snapshot in message.message_snapshots:
        if snapshot.content.strip():
            lines.append(f"[forwarded] {snapshot.content}")
        lines += note_files("attachment", (a.filename for a in snapshot.attachments))
    lines += note_files("attachment", (a.filename for a in message.attachments))
    lines += note_files("sticker", (s.name for s in message.stickers))
    return "\n".join(lines)


def to_incoming(message: discord.Message, bot_user_id: int) -> IncomingMessage | None:
    """Translate a Discord message; ``None`` for bots, webhooks, the bot itself, system
    messages and messages with nothing to store."""
    author = message.author
    if author.bot or author.id == bot_user_id or message.webhook_id is not None:
        return None
    if message.type not in _CHAT_TYPES:
        return None
    text = message_text(message)
    if not text.strip():
        return None
    guild_id = message.guild.id if message.guild is not None else None
    return IncomingMessage(
        key=channel_key(guild_id, message.channel.id),
        message_id=str(message.id),
        author_id=str(author.id),
        author_name=author.display_name,
        text=text,
        sent_at=message.created_at.timestamp(),
        mentions_bot=_mentions_bot(message, bot_user_id),
        is_direct=guild_id is None,
        reply_to_bot=_replies_to(message, bot_user_id),
        roles=role_ids(author),
        parent=parent_of(message.channel),
        reads_history=reads_history(message.channel, author),
        attachments=attachments_of(  # read by bot.attachments
            [*(a for snap in message.message_snapshots for a in snap.attachments),
             *message.attachments]),
    )


@dataclass(frozen=True, slots=True)
class ReplyPlan:
    """What to send for one answer: the messages, and the overflow for a ``.txt`` file."""

    messages: list[str]
    attachment: str | None = None


def plan_reply(
    text: str, *, limit: int = MESSAGE_LIMIT, max_messages: int = MAX_MESSAGES
) -> ReplyPlan:
    """Split ``text`` into at most ``max_messages`` messages of at most ``limit``
    characters; what does not fit goes into ``attachment`` (code block reopened)."""
    parts = [p for p in split_parts(text, limit) if p.text.strip()]
    if len(parts) <= max_messages:
        return ReplyPlan([p.text for p in parts])
    kept, rest = parts[:max_messages], parts[max_messages:]
    overflow = rest[0].opener + "".join(p.body for p in rest)
    return ReplyPlan([p.text for p in kept], overflow.strip("\n") + "\n")


def preview(text: str, *, limit: int = MESSAGE_LIMIT) -> str:
    """The first message's worth of a reply still being written, marked as unfinished."""
    parts = [p for p in split_parts(text, limit - 2) if p.text.strip()]
    if not parts:
        return "…"
    return parts[0].text + (" …" if len(parts) > 1 else "")


def text_file(text: str) -> discord.File:
    """The overflow of a long reply, as an attached ``reply.txt``."""
    return discord.File(io.BytesIO(text.encode("utf-8")), filename="reply.txt")
