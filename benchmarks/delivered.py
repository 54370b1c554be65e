"""A message through the path an adapter takes, for the benchmarks that want the answer
itself: ``ChatService.receive``, then the ``ReplyFlow`` every platform uses (outbox and
settling included) into an outlet that keeps the reply in memory instead of posting it:
the answer as a person would have seen it (``failed`` for a notice, its outbox id says so;
``private`` for a whisper, the quota notice). The tests' harness drives messages the same way.
"""

from __future__ import annotations

import contextlib
import itertools
from contextlib import AbstractAsyncContextManager

from bot.app import Runtime
from bot.conversation.outbox import Post, placeholder_id
from bot.conversation.reply_flow import ReplyFlow
from bot.messages import DeltaSink, IncomingMessage, Reply
from memory.models import ChannelKey

__all__ = ["Collected", "answer"]


class Collected:
    """A ``ReplyOutlet`` that keeps each post and edit; streamed only when given a sink
    (every update shown, none throttled away)."""

    placeholder = ""

    def __init__(self, msg: IncomingMessage, on_delta: DeltaSink | None = None) -> None:
        self.on_delta = on_delta
        self.placeholder_id = placeholder_id(msg.key, msg.message_id)
        self.stream_interval: float | None = None if on_delta is None else 0.0
        self.sent: dict[str, Post] = {}  # by outbox id, the latest text of each
        self.whispered: list[str] = []
        self._ids = itertools.count(1)

    async def _shown(self, post: Post) -> None:
        self.sent[post.outbox_id] = post
        if self.on_delta is not None and post.outbox_id == self.placeholder_id:
            await self.on_delta(post.text)

    async def post(self, post: Post) -> str | None:
        await self._shown(post)
        return f"posted-{next(self._ids)}"

    async def edit(self, post: Post, message_id: str) -> bool:
        await self._shown(post)
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
        self.whispered.append(text)

    def working(self, key: ChannelKey) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def reply(self) -> Reply | None:
        """What the person was shown in the end: the reply's parts, or the whisper."""
        if self.whispered:
            return Reply(self.whispered[-1], failed=True, private=True)
        parts = [p for i, p in self.sent.items() if i != self.placeholder_id]
        if not parts:
            return None
        return Reply("".join(p.text for p in parts),
                     failed=parts[0].outbox_id.startswith("notice:"))


async def answer(rt: Runtime, msg: IncomingMessage, *,
                 on_delta: DeltaSink | None = None) -> Reply | None:
    """Hand ``msg`` to ``rt``'s service as an adapter does and deliver its reply, if one is
    owed, through a ``ReplyFlow`` on the runtime's outbox; the reply the person saw (None:
    none was sent)."""
    received = await rt.service.receive(msg)
    if received.reply is None:
        return None
    outlet = Collected(msg, on_delta)
    await ReplyFlow(outlet, rt.features.outbox).deliver(received.reply)
    return outlet.reply()
