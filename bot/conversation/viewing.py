"""The channel a person is viewing while they ask (``IncomingMessage.viewing``): its memory
in the reply's prompt when the read check let the person read it, else a sentence saying
it was left out.

The adapter asks the read check (``bot.read_check``) before it hands the message over, so
nothing here decides who may read what; this only spends part of the reply's memory budget
on the other channel and says when it could not.
"""

from __future__ import annotations

from bot.conversation.prompts import viewed_lines
from bot.messages import IncomingMessage
from memory.manager import MemoryManager
from memory.models import MemoryView

__all__ = ["CANNOT_READ_VIEWED", "VIEWED_SHARE", "viewed_memory", "with_refusal"]

VIEWED_SHARE = 2  # the viewed channel may take 1/VIEWED_SHARE of the reply's memory budget
CANNOT_READ_VIEWED = ("You can't read the history of the channel you're viewing, so I answer "
                      "without what I remember of it.")


async def viewed_memory(memory: MemoryManager, msg: IncomingMessage,
                        budget: int) -> tuple[MemoryView | None, int]:
    """What the bot remembers of the channel ``msg``'s author is viewing (None: nothing to
    show them) and the tokens it costs in the prompt, within ``budget // VIEWED_SHARE``."""
    viewing = msg.viewing
    if viewing is None or not viewing.readable or viewing.key == msg.key:
        return None, 0
    view = await memory.view(viewing.key, budget // VIEWED_SHARE)
    return view, memory.tokenizer.count("\n".join(viewed_lines(view)))


def with_refusal(msg: IncomingMessage, text: str) -> str:
    """``text`` led by a sentence saying the viewed channel was left out, when it was."""
    viewing = msg.viewing
    if viewing is None or viewing.readable or viewing.key == msg.key:
        return text
    return f"{CANNOT_READ_VIEWED}\n\n{text}"
