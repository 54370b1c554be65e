"""What a weak model writes does not become the memory's evidence.

A small model (SmolLM2-135M on one slot) began every reply with the same line copied from
the conversation, and its replies were recalled into later prompts over what people said;
``/summary`` printed its non-answer as if it were the summary. Here: the bot's replies are
recalled only after people's messages and once per opening line, and a summary that says
nothing about the conversation is rejected, so ``/summary`` shows the stored one, marked.
"""

from __future__ import annotations

from pathlib import Path

from memory.archive import Archive
from memory.config import VIEW_TURN_LIMIT, MemoryConfig
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore
from memory.tokens import TokenCounter

KEY = ChannelKey("discord", "g", "c")
TOK = TokenCounter("gpt-4o")
COPIED = '"MORENA: tomorrow team standup moves to the harbour office at nine'


async def test_the_bots_junk_replies_are_not_recalled_over_peoples_messages(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "s.db")
    await store.open()
    try:
        said: list[tuple[str, str, str]] = []
        said.append(("user", "Morena", "Tomorrow the team standup moves to the harbour office."))
        said.append(("user", "Ivo", "The harbour office badge for the standup is B-77."))
        for i in range(120):
            said.append(("user", "Ivo" if i % 2 else "Morena", f"lunch plan {i} sounds fine"))
            if i % 3 == 0:  # the bot answers often, always opening with the copied line
                said.append(("assistant", "gistbot",
                             f"{COPIED}\nthe standup harbour office team tomorrow {i}"))
        said.append(("user", "Ivo", "@gistbot where is the team standup tomorrow, which office?"))
        for i, (role, who, text) in enumerate(said):
            await store.record(NewTurn(KEY, f"m{i}", role, who.lower(), who, text,
                                       TOK.count(text), 1_700_000_000.0 + 60 * i))
        state, turns = await store.snapshot(KEY, limit=VIEW_TURN_LIMIT)
        archive = Archive(store, TOK, MemoryConfig(recall_tokens=None))
        view = await archive.view(KEY, state, turns[-6:], 600)
        recalled = list(view.recall.turns)
        texts = [t.text for t in recalled]
        assert "Tomorrow the team standup moves to the harbour office." in texts
        assert "The harbour office badge for the standup is B-77." in texts
        junk = [t for t in recalled if t.role == "assistant"]
        assert len(junk) <= 1, [t.text for t in junk]  # one line per opening at most
        assert view.tokens <= 600
    finally:
        await store.close()
