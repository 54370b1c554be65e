"""Recall of stored turns for a question that takes two steps (``Archive._follow_up``).

"What is the name of the vessel Dave will sail on in the regatta?" shares a word with
"Dad wants me to crew on his boat for the regatta" but none with the message that holds
the answer, "My dad bought a sailboat and named it Driftwood": only the first message's
own words ("dad", "boat") lead there. Without the follow-up search the answer is one of
hundreds of Dave's messages, none ranked above another.
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


async def test_a_two_step_question_recalls_the_message_its_first_match_points_to(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "s.db")
    await store.open()
    try:
        said = [("Dave", "My dad bought a sailboat and named it Driftwood.")]
        # Dave says most of it: his name (indexed with each message) tells nothing apart.
        said += [("Dave" if i % 3 else "Nate", f"lunch plan {i} sounds fine") for i in range(300)]
        said.insert(150, ("Dave", "Dad wants me to crew on his boat for the regatta."))
        said.append(("Quinn", "What is the name of the vessel Dave will sail on in the regatta?"))
        for i, (who, text) in enumerate(said):
            await store.record(NewTurn(KEY, f"m{i}", "user", who.lower(), who, text,
                                       TOK.count(text), 1_700_000_000.0 + 60 * i))
        state, turns = await store.snapshot(KEY, limit=VIEW_TURN_LIMIT)
        archive = Archive(store, TOK, MemoryConfig(recall_tokens=None))  # the default setting
        view = await archive.view(KEY, state, turns, 1000)
        recalled = [t.text for t in view.recall.turns]
        assert "Dad wants me to crew on his boat for the regatta." in recalled
        assert "My dad bought a sailboat and named it Driftwood." in recalled
        assert view.tokens <= 1000
    finally:
        await store.close()
