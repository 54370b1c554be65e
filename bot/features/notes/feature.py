"""Personal notes at work: ``/aboutme remember``, ``/aboutme`` and ``/aboutme forget`` for
the person who asks, and the notes in the prompt of that person's own replies.

A note is about the person who wrote it and is used only for them: ``prompt_lines`` is asked
with the message a reply answers and reads the notes of that message's author, on that
server, and nothing else reads them into a prompt (not another person's reply, not a
summary, a digest or a catch-up, which never ask). Nothing is kept until a person asks.
Where a server turned them off (``/config set server personal_notes off``) none is kept or
used; the person can still list and forget what was kept before.

Bounded: ``MAX_NOTE_CHARS`` a note, ``MAX_NOTES`` a person, and the notes' lines fit the
tokens the reply gives them (the oldest first; what does not fit is left out).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from bot.features.notes.store import NotesStore, Person
from bot.features.notes.wording import (
    ALL_FORGOTTEN,
    CAP_REACHED,
    EMPTY,
    FORGOT,
    HEADING,
    KEPT,
    KEPT_BEFORE,
    LISTING,
    NO_SUCH_NOTE,
    NOTHING_TO_FORGET,
    OFF_HERE,
    STORE_FAILED,
    TOO_LONG,
)
from bot.messages import CommandResult, IncomingMessage
from memory.errors import StoreError
from memory.models import ChannelKey
from memory.speakers import human_name
from memory.text import clean_text, defuse
from memory.tokens import Tokenizer

__all__ = ["MAX_NOTES", "MAX_NOTE_CHARS", "SETTING", "Notes"]

log = logging.getLogger(__name__)

MAX_NOTE_CHARS = 500
MAX_NOTES = 20
SETTING = "personal_notes"  # the server's /config key: on (default) or off


class Notes:
    """The personal notes of everyone, kept in ``store`` (see the module docstring)."""

    def __init__(self, store: NotesStore, tokenizer: Tokenizer,
                 setting: Callable[[ChannelKey, str], Awaitable[str]],
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.tokenizer, self.setting, self.clock = store, tokenizer, setting, clock

    async def on(self, key: ChannelKey) -> bool:
        """Whether the server of ``key`` keeps and uses personal notes."""
        return await self.setting(key, SETTING) != "off"

    async def remember(self, key: ChannelKey, user_id: str, text: str) -> CommandResult:
        """Keep ``text`` as a note about ``user_id`` on the server of ``key``."""
        text = clean_text(text).strip()
        if len(text) > MAX_NOTE_CHARS:
            return CommandResult(TOO_LONG.format(limit=MAX_NOTE_CHARS,
                                                         length=len(text)), ok=False)
        if not await self.on(key):
            return CommandResult(OFF_HERE, ok=False)
        try:
            added = await self.store.add(Person.of(key, user_id), text, now=self.clock(),
                                         cap=MAX_NOTES)
        except StoreError as e:
            log.error("could not keep a note of %s in %s: %s", user_id, key, e, exc_info=e)
            return CommandResult(STORE_FAILED, ok=False)
        if added.note is None:
            return CommandResult(CAP_REACHED.format(cap=MAX_NOTES), ok=False)
        said = KEPT if added.new else KEPT_BEFORE
        return CommandResult(said.format(n=added.note.n))

    async def listing(self, key: ChannelKey, user_id: str) -> CommandResult:
        """The notes about ``user_id`` on the server of ``key``, for them only."""
        try:
            notes = await self.store.notes(Person.of(key, user_id))
        except StoreError as e:
            log.error("could not read the notes of %s in %s: %s", user_id, key, e, exc_info=e)
            return CommandResult(STORE_FAILED, ok=False)
        if not notes:
            return CommandResult(EMPTY)
        lines = [LISTING, *(f"#{n.n} {n.text}" for n in notes)]
        if not await self.on(key):
            lines.append(OFF_HERE)
        return CommandResult("\n".join(lines))

    async def forget(self, key: ChannelKey, user_id: str, n: int | None) -> CommandResult:
        """Forget note ``n`` of ``user_id`` (None: all of theirs) on the server of ``key``."""
        try:
            count = await self.store.forget(Person.of(key, user_id), n)
        except StoreError as e:
            log.error("could not forget a note of %s in %s: %s", user_id, key, e, exc_info=e)
            return CommandResult(STORE_FAILED, ok=False)
        if n is None:
            return CommandResult(ALL_FORGOTTEN.format(count=count) if count
                                 else NOTHING_TO_FORGET)
        if not count:
            return CommandResult(NO_SUCH_NOTE.format(n=n), ok=False)
        return CommandResult(FORGOT.format(n=n))

    async def prompt_lines(self, msg: IncomingMessage, budget: int) -> Sequence[str]:
        """The notes of ``msg``'s author, for the reply to it: a heading and one line a
        note, oldest first, as many as fit ``budget`` tokens (none: nothing)."""
        if budget <= 0 or not await self.on(msg.key):
            return ()
        notes = await self.store.notes(Person.of(msg.key, msg.author_id))
        if not notes:
            return ()
        name = human_name(msg.author_name, ()) or "the person"
        lines = [defuse(HEADING.format(name=name))]
        used = self.tokenizer.count(lines[0])
        for note in notes:
            line = defuse(f"- {note.text}")
            cost = self.tokenizer.count(line) + 1  # the line break
            if used + cost > budget:
                break
            lines.append(line)
            used += cost
        return lines if len(lines) > 1 else ()
