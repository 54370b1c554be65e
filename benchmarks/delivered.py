"""A message through the path an adapter takes, for the benchmarks that want the answer
itself: ``ChatService.receive``, then the ``ReplyFlow`` every platform uses (outbox and
settling included) into an outlet that keeps the reply in memory instead of posting it.
"""

from __future__ import annotations

import contextlib
import itertools
from contextlib import AbstractAsyncContextManager

from bot.app import Runtime
from bot.conversation.outbox import Post, placeholder_id
from bot.conversation.reply_flow import ReplyFlow
from bot.messages import IncomingMessage, Reply
from memory.models import ChannelKey

__all__ = ["answer"]


class _Kept:
    """A ``ReplyOutlet`` that keeps what would have been posted (not streamed)."""

    placeholder = ""
    stream_interval: float | None = None

    def __init__(self, msg: IncomingMessage) -> None:
        self.placeholder_id = placeholder_id(msg.key, msg.message_id)
        self.sent: dict[str, Post] = {}
        self.whispered = ""
        self._ids = itertools.count(1)

    async def post(self, post: Post) -> str | None:
        self.sent[post.outbox_id] = post
        return f"kept-{next(self._ids)}"

    async def edit(self, post: Post, message_id: str) -> bool:
        self.sent[post.outbox_id] = post
        return True

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        return True

    async def find(self, post: Post) -> str | None:
        return None

    def split(self, text: str) -> tuple[list[str], str]:
        return [text], ""

    def preview(self, text: str) -> str:
        return text

    async def whisper(self, msg: IncomingMessage, text: str) -> None:
        self.whispered = text

    def working(self, key: ChannelKey) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def reply(self) -> Reply | None:
        if self.whispered:
            return Reply(self.whispered, failed=True, private=True)
        parts = [p for i, p in self.sent.items() if i != self.placeholder_id]
        if not parts:
            return None
        return Reply("".join(p.text for p in parts),
                     failed=parts[0].outbox_id.startswith("notice:"))


async def answer(rt: Runtime, msg: IncomingMessage) -> Reply | None:
    """Hand ``msg`` to ``rt``'s service as an adapter does and deliver the reply owed, if
    any; the reply as the person would have seen it (None: nothing was sent)."""
    received = await rt.service.receive(msg)
    if received.reply is None:
        return None
    outlet = _Kept(msg)
    await ReplyFlow(outlet, rt.features.outbox).deliver(received.reply)
    return outlet.reply()
