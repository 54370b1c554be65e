"""Multi-hop recall (``memory.hops``, ``Archive._hops``) and a recalled "she …" shown with the
message that names her (``memory.antecedent``).

"Where will Leo see the band his godmother plays in?" shares a word with the first turn
of the chain only ("Flip, my godmother, plays bass"); the second names Flip's band, the
third where that band plays. Only searching again with what each step says reaches the
third.
"""

from __future__ import annotations

from pathlib import Path

from memory.antecedent import answers_about, asks, refers_back
from memory.archive import Archive
from memory.config import VIEW_TURN_LIMIT, MemoryConfig
from memory.hops import hop_terms, name_terms, with_chains
from memory.models import ChannelKey, NewTurn, Turn
from memory.stores.sqlite.store import SqliteStore
from memory.tokens import TokenCounter

KEY = ChannelKey("discord", "g", "c")
TOK = TokenCounter("gpt-4o")


async def _view(tmp_path: Path, said: list[tuple[str, str]], budget: int) -> list[str]:
    store = SqliteStore(tmp_path / "s.db")
    await store.open()
    try:
        for i, (who, text) in enumerate(said):
            await store.record(NewTurn(KEY, f"m{i}", "user", who.lower(), who, text,
                                       TOK.count(text), 1_700_000_000.0 + 60 * i))
        state, turns = await store.snapshot(KEY, limit=VIEW_TURN_LIMIT)
        archive = Archive(store, TOK, MemoryConfig(recall_tokens=None))
        view = await archive.view(KEY, state, turns, budget)
        assert view.tokens <= budget
        return [t.text for t in view.recall.turns]
    finally:
        await store.close()


async def test_a_three_step_question_recalls_every_step(tmp_path: Path) -> None:
    chain = ["Did I mention Flip, my godmother, plays bass now?",
             "Looked up Flip's band, Salt and Sulphur, they're actually not bad.",
             "Salt and Sulphur got a gig at the Foundry next month, Leo has tickets."]
    said = [("Leo" if i % 2 else "Nat", f"lunch plan {i} sounds fine") for i in range(400)]
    said.insert(300, ("Nat", chain[2]))
    said.insert(200, ("Ana", chain[1]))
    said.insert(100, ("Leo", chain[0]))
    said.append(("Quinn", "Where will Leo see the band his godmother plays in?"))
    recalled = await _view(tmp_path, said, 1000)
    assert [step in recalled for step in chain] == [True, True, True], recalled[:12]


async def test_a_recalled_she_comes_with_the_message_naming_her(tmp_path: Path) -> None:
    said = [("Ana" if i % 2 else "Nat", f"the chess club met again, round {i}")
            for i in range(120)]
    said.insert(60, ("Rosa", "How's Bart doing, by the way?"))
    said.insert(61, ("Neil", "He joined a climbing club, Thursdays are off limits."))
    said += [("Nat", f"weather talk {i}") for i in range(20)]
    said.append(("Quinn", "Which climbing club did Bartholomew join?"))
    recalled = await _view(tmp_path, said, 700)
    assert "He joined a climbing club, Thursdays are off limits." in recalled
    assert "How's Bart doing, by the way?" in recalled


async def test_a_question_about_someone_comes_with_the_reply_about_him(tmp_path: Path) -> None:
    said = [("Ana" if i % 2 else "Nat", f"band practice {i} ran long again") for i in range(120)]
    said.insert(60, ("Rosa", "Has anyone heard from Bart lately?"))
    said.insert(61, ("Neil", "Honestly, he caught Salt and Sulphur twice and came back hoarse."))
    said += [("Nat", f"weather talk {i}") for i in range(20)]
    said.append(("Quinn", "Which band did Bart see live?"))
    recalled = await _view(tmp_path, said, 700)
    assert "Has anyone heard from Bart lately?" in recalled
    assert "Honestly, he caught Salt and Sulphur twice and came back hoarse." in recalled


def test_answers_about_wants_another_speaker_and_a_pronoun() -> None:
    def turn(author: str, text: str) -> Turn:
        return Turn(KEY, 1, "m1", "user", author, author, text, 1, 0.0)

    question = turn("rosa", "Has anyone heard from Bart lately?")
    assert answers_about(turn("neil", "Freddie, did he ever send the photos?"), question)
    assert answers_about(turn("neil", "그녀는 요즘 바빠"), question)
    assert not answers_about(turn("rosa", "He went climbing."), question)
    assert not answers_about(turn("neil", "The weather turned."), question)
    assert not answers_about(turn("neil", "Shelly went climbing."), question)


def test_hop_terms_take_each_source_in_turn_and_skip_used_words() -> None:
    def turn(seq: int, text: str, role: str = "user") -> Turn:
        return Turn(KEY, seq, f"m{seq}", role, "u", "U", text, 1, 0.0)

    used = {"godmother"}
    terms = hop_terms([turn(1, "Flip my godmother plays bass"), turn(2, "Salt Sulphur"),
                       turn(3, "Bot reply words", "assistant")], used)
    assert terms[:2] == ["flip", "salt"] and "godmother" not in terms
    assert "bot" not in terms and "reply" not in terms
    assert hop_terms([turn(1, "Flip my godmother plays bass")], used) == []


def test_refers_back_reads_the_opening_word() -> None:
    assert refers_back("She fractured her wrist on the stairs.")
    assert refers_back("  his bike is teal")
    assert refers_back("걔 요즘 클라이밍 동호회 들어갔대")
    assert not refers_back("Shelly fractured her wrist.")
    assert not refers_back("Rosa joined a club.")
    assert not refers_back("")
    assert asks("How's Bart doing, by the way? ") and asks("바트는 잘 지내？")
    assert not asks("Bart went climbing.")


async def _view_learned(tmp_path: Path, said: list[tuple[str, str]], budget: int) -> list[str]:
    """``_view`` with the channel's names learned as ``MemoryManager.record`` learns them."""
    store = SqliteStore(tmp_path / "s.db")
    await store.open()
    try:
        archive = Archive(store, TOK, MemoryConfig(recall_tokens=None))
        for i, (who, text) in enumerate(said):
            await store.record(NewTurn(KEY, f"m{i}", "user", who.lower(), who, text,
                                       TOK.count(text), 1_700_000_000.0 + 60 * i))
            archive.aliases.learn(KEY, who.lower(), who, text)
        state, turns = await store.snapshot(KEY, limit=VIEW_TURN_LIMIT)
        view = await archive.view(KEY, state, turns, budget)
        assert view.tokens <= budget
        return [t.text for t in view.recall.turns]
    finally:
        await store.close()


def _chatter(n: int) -> list[tuple[str, str]]:
    """``n`` messages of small talk, more than a search's candidates."""
    topics = ["lunch", "weather", "trains", "football", "rent", "coffee", "gym", "music"]
    return [("Ana" if i % 2 else "Nat", f"{topics[i % len(topics)]} again today, number {i}")
            for i in range(n)]


async def test_the_names_round_finds_a_chain_named_by_another_form(tmp_path: Path) -> None:
    # The third step names the cousin by the full name ("Percival"), the first two by the
    # short one; nothing of the question is in the third, and the first ranks low.
    chain = ["Percy, my cousin, got into an oceanography programme, so proud.",
             "So Percy's course is abroad? Leo said he leaves in September.",
             "Percival found a room near the campus in Galway, it's all real now."]
    said = _chatter(1500)
    said.insert(1200, ("Nat", chain[2]))
    said.insert(700, ("Ana", chain[1]))
    said.insert(200, ("Leo", chain[0]))
    said.append(("Quinn", "Where is Leo's relative moving to study?"))
    recalled = await _view_learned(tmp_path, said, 6000)
    assert [step in recalled for step in chain] == [True, True, True], recalled[:12]


def test_with_chains_puts_a_named_turn_after_its_source_within_the_room() -> None:
    def turn(seq: int, text: str, tokens: int = 10) -> Turn:
        return Turn(KEY, seq, f"m{seq}", "user", "a", "A", text, tokens, 0.0)

    src, other, far = turn(1, "Percy got in"), turn(2, "rain again"), turn(3, "Percy moved")
    assert with_chains([src, other, far], {"percy": 1}, [far], 1000) == [src, far, other]
    assert with_chains([far, src], {"percy": 1}, [far], 1000) == [far, src]  # already above
    assert with_chains([src, other, far], {"percy": 1}, [far], 10) == [src, other, far]
    assert name_terms([turn(1, "Saw Percy and the Hollow Pines")], {"saw"}) == {
        "percy": 1, "hollow": 1, "pines": 1}
    assert name_terms([turn(1, "퍼시가 왔어요 today")], set()) == {}
    # a sentence's first word is a name only where the channel writes it so elsewhere
    opening = [turn(1, "Percy went. Galway next!")]
    assert name_terms(opening, set()) == {}
    assert name_terms(opening, set(), lambda w: w in {"percy", "galway"}) == {
        "percy": 1, "galway": 1}
