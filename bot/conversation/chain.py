"""A reply chain in the prompt: the messages a message replies to, back up the chain.

A side discussion in a busy channel is a chain of replies whose first messages left the
verbatim window long ago. The adapter says which messages the chain holds (``ChainLink``s,
nearest first; it knows the platform's rules: only the same channel, a bounded depth); here
they become turns — the stored turn by message id first (storage has every recorded
message, as stored: files read, edits applied), else the text the adapter read — and are
fitted into ``CHAIN_SHARE`` of the reply's memory budget, nearest first, so a long chain is
cut at its far end. The service pays for the chain before it reads the view, so the prompt
stays within ``CONTEXT_TOKENS − REPLY_TOKENS``; a chain message the view shows verbatim is
not repeated. The chain goes into the fenced memory block (``bot.conversation.prompts``):
it is what people said, data like the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from bot.messages import ChainLink, IncomingMessage
from memory.models import ChannelKey, MemoryView, Turn
from memory.recall import recalled_turn_line
from memory.text import defuse
from memory.tokens import Tokenizer
from memory.window import truncate_marked

__all__ = ["CHAIN_HEADING", "CHAIN_SHARE", "Chain", "ChainStore", "chain_lines", "fit_chain",
           "read_chain"]

log = logging.getLogger(__name__)

CHAIN_SHARE = 0.3
"""Of a reply's memory budget, what its reply chain may take at most: the chain is the
conversation being answered, so it gets more than any one recalled part, but the recent
turns and the summary keep the rest."""
CHAIN_HEADING = "## The conversation this message replies to (oldest first)"
_LINE = 1  # the line break after each rendered line


class ChainStore(Protocol):
    """Where chain messages are found by their platform id."""

    async def turns_with_ids(self, key: ChannelKey, message_ids: Sequence[str]) -> list[Turn]:
        """Stored turns of ``key`` with these message ids (unknown ones skipped)."""


@dataclass(frozen=True, slots=True)
class Chain:
    """The chain a reply shows, oldest first, and what it costs in the prompt."""

    turns: tuple[Turn, ...] = ()
    tokens: int = 0

    def without(self, view: MemoryView) -> Chain:
        """The chain less the messages ``view`` shows verbatim anyway: by message id, or,
        for the bot's own messages (stored under another id than the platform's), by text
        the view's turn contains. Its cost stays as paid."""
        ids = {t.message_id for t in view.turns}
        said = [_folded(t.text) for t in view.turns if t.role == "assistant"]

        def shown(turn: Turn) -> bool:
            if turn.message_id in ids:
                return True
            text = _folded(turn.text) if turn.role == "assistant" else ""
            return bool(text) and any(text in other for other in said)

        return replace(self, turns=tuple(t for t in self.turns if not shown(t)))

    def unrecalled(self, view: MemoryView) -> MemoryView:
        """``view`` without recalled messages the chain shows: there they are in their
        conversation (the recall's cost stays as paid)."""
        ids = {t.message_id for t in self.turns}
        if not any(t.message_id in ids for t in view.recall.turns):
            return view
        recall = replace(view.recall, turns=tuple(
            t for t in view.recall.turns if t.message_id not in ids))
        return replace(view, recall=recall)


def _folded(text: str) -> str:
    return " ".join(text.split())


async def read_chain(store: ChainStore, msg: IncomingMessage) -> list[Turn]:
    """The turns of ``msg``'s reply chain, nearest first: stored ones by message id, else
    what the adapter read; a link found in neither is left out. Never the message itself."""
    if msg.chain is None:
        return []
    links: Sequence[ChainLink] = await msg.chain()
    links = [link for link in links if link.message_id != msg.message_id]
    if not links:
        return []
    stored = {t.message_id: t for t in await store.turns_with_ids(
        msg.key, [link.message_id for link in links])}
    turns: list[Turn] = []
    for link in links:
        turn = stored.get(link.message_id)
        if turn is None and link.text is not None and link.text.strip():
            turn = Turn(msg.key, 0, link.message_id, "assistant" if link.own else "user", "",
                        link.author_name, link.text, 0, link.sent_at)
        if turn is not None:
            turns.append(turn)
    return turns


def _line_cost(turn: Turn, tokenizer: Tokenizer) -> int:
    return tokenizer.count(defuse(recalled_turn_line(turn))) + _LINE


def fit_chain(nearest_first: Sequence[Turn], room: int, tokenizer: Tokenizer) -> Chain:
    """As much of the chain as ``room`` tokens hold, nearest first, paid as
    ``chain_lines`` renders it (heading included); the far end is cut, and one message
    longer than half the room is cut with a marker."""
    if not nearest_first or room <= 0:
        return Chain()
    used = tokenizer.count(CHAIN_HEADING) + 2 * _LINE  # after a blank line
    cap = max(room // 2, 1)
    taken: list[Turn] = []
    for turn in nearest_first:
        if tokenizer.count(turn.text) > cap:
            text = truncate_marked(turn.text, cap, tokenizer)
            turn = replace(turn, text=text, tokens=tokenizer.count(text))
        cost = _line_cost(turn, tokenizer)
        if used + cost > room:
            break
        used += cost
        taken.append(turn)
    if not taken:
        return Chain()
    return Chain(tuple(reversed(taken)), used)


def chain_lines(chain: Sequence[Turn]) -> list[str]:
    """The chain under its heading, one line a message, oldest first (not defused)."""
    if not chain:
        return []
    return [CHAIN_HEADING, *(recalled_turn_line(t) for t in chain)]
