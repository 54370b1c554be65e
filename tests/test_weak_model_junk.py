"""What a weak model writes does not become the memory's evidence.

A small model (SmolLM2-135M on one slot) began every reply with the same line copied from
the conversation, and its replies were recalled into later prompts over what people said;
``/summary`` printed its non-answer as if it were the summary. Here: the bot's replies are
recalled only after people's messages and once per opening line, and a summary that says
nothing about the conversation is rejected, so ``/summary`` shows the stored one, marked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.archive import Archive
from memory.config import VIEW_TURN_LIMIT, MemoryConfig
from memory.models import ChannelKey, NewTurn, Turn
from memory.non_answer import non_answer
from memory.stores.sqlite.store import SqliteStore
from memory.tokens import TokenCounter
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.harness.chat import ask
from tests.harness.service import KEY as SERVICE_KEY
from tests.harness.service import msg, runtime

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


def _turns(*texts: str) -> list[Turn]:
    return [Turn(KEY, i + 1, f"m{i}", "user", "morena", "Morena", t, TOK.count(t), 0.0)
            for i, t in enumerate(texts)]


SAID = _turns("tomorrow team standup moves to the harbour office at nine",
              "bring the B-77 badge", "Ivo will book the small room for the retro")
SOURCE = "\n".join(t.text for t in SAID)


@pytest.mark.parametrize(("answer", "why"), [
    ("Sure! I am ready to help you with that whenever you like.", "shares no word"),
    ('"MORENA: tomorrow team standup moves to the harbour office', "copies one message"),
    ("[Morena]: bring the B-77 badge", "copies one message"),
    ("<<<NEW MESSAGES>>>\n[Morena]: tomorrow team standup", "instructions"),
    ("Token limit: 124. The team standup moves.", "instructions"),
])
def test_non_answers_are_recognised(answer: str, why: str) -> None:
    reason = non_answer(answer, SOURCE, SAID)
    assert reason is not None and why in reason


@pytest.mark.parametrize("answer", [
    "## Topics\n- Morena: the team standup moves to the harbour office at nine tomorrow.",
    "Standup tomorrow at nine in the harbour office (Morena); Ivo books the retro room.",
    "Morena moved the standup; badge B-77.",
    "Morena a déplacé la réunion au port.",  # the channel's set language: the name is shared
])
def test_real_summaries_pass(answer: str) -> None:
    assert non_answer(answer, SOURCE, SAID) is None
    greetings = _turns("hi", "hello there", "good morning")
    assert non_answer("Morena greeted everyone.", "hi\nhello there\ngood morning",
                      greetings) is None
    # one or two messages may well be summarized by repeating one
    assert non_answer(SAID[1].text, SOURCE, SAID[:2]) is None


async def test_summary_command_marks_an_unusable_answer_and_shows_the_stored_summary(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, runtime(tmp_path, fake) as rt:
        for i, text in enumerate(["tomorrow team standup moves to the harbour office",
                                  "bring the B-77 badge", "Ivo books the retro room"]):
            await ask(rt, msg(i, text, author="Morena"))
        assert await rt.memory.compact_now(SERVICE_KEY, force=True)
        stored = (await rt.store.state(SERVICE_KEY)).text
        assert stored
        await ask(rt, msg(9, "and the coffee machine is fixed", author="Ivo"))
        fake.push("Sure! I am ready to help you with that whenever you like.")
        result = await rt.features.memory_commands.summary(SERVICE_KEY)
    assert "ready to help" not in result.text
    assert stored.strip() in result.text
    assert "answer was unusable; this is the stored summary" in result.text
