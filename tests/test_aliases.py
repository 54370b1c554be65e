"""Nicknames learned from the channel (``memory.aliases``): a question that names
"Rosalind" recalls what her friends said about "Roz".

The turn index holds each turn's author, so the full name finds every message Rosalind
wrote and none that her friends wrote about her by nickname.
"""

from __future__ import annotations

from pathlib import Path

from memory.aliases import Aliases, ChannelAliases, name_variant, short_form
from memory.config import MemoryConfig
from memory.manager import MemoryManager
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter
from memory.window import WindowPolicy
from tests.fakes.models import ExtractiveModel

KEY = ChannelKey("discord", "g", "c")
EVIDENCE = "Roz's dog finally has a name: Biscuit. Suits him."


def _chat() -> list[tuple[str, str]]:
    said: list[tuple[str, str]] = []
    for i in range(240):
        who = ("Rosalind", "Bart", "Pip")[i % 3]
        said.append((who, f"the road works on the high street again, week {i}"))
    for i, who in enumerate(["Bart", "Pip", "Bart", "Pip"]):
        said.insert(30 + 40 * i, (who, f"Roz, are you coming to the quiz on night {i}?"))
    said.insert(120, ("Pip", EVIDENCE))
    return said


def _manager(store: SqliteStore, tok: TokenCounter) -> MemoryManager:
    return MemoryManager(store, Summarizer(ExtractiveModel(tok), tok, summary_tokens=300), tok,
                         WindowPolicy(max_messages=1000, keep_messages=4),
                         config=MemoryConfig(retry_base=0.01))


async def _recalled(tmp_path: Path, tok: TokenCounter, question: str,
                    said: list[tuple[str, str]], *, restart: bool = False) -> list[str]:
    store = SqliteStore(tmp_path / "aliases.db", synchronous="OFF")
    await store.open()
    mgr = _manager(store, tok)
    try:
        for i, (who, text) in enumerate(said):
            await mgr.record(NewTurn(KEY, f"m{i}", "user", who.lower(), who, text, 0,
                                     1_700_000_000.0 + 60 * i))
        if restart:  # a new process: what was learned is gone, the stored turns are not
            await mgr.close()
            mgr = _manager(store, tok)
            await mgr.record(NewTurn(KEY, "hello", "user", "quinn", "Quinn", "hello all", 0,
                                     1_700_100_000.0))
            await mgr.wait_idle()
        await mgr.record(NewTurn(KEY, "q", "user", "quinn", "Quinn", question, 0,
                                 1_700_100_060.0))
        view = await mgr.view(KEY, 700, recall=True)
        assert view.tokens <= 700
        return [t.text for t in view.recall.turns]
    finally:
        await mgr.close()
        await store.close()


async def test_a_full_name_recalls_what_friends_said_by_nickname(
        tmp_path: Path, tok: TokenCounter) -> None:
    recalled = await _recalled(tmp_path, tok, "What did Rosalind call the new puppy?", _chat())
    assert EVIDENCE in recalled, recalled[:10]


async def test_after_a_restart_the_aliases_are_learned_from_the_stored_turns(
        tmp_path: Path, tok: TokenCounter) -> None:
    recalled = await _recalled(tmp_path, tok, "What did Rosalind call the new puppy?", _chat(),
                               restart=True)
    assert EVIDENCE in recalled, recalled[:10]


def test_a_nickname_is_learned_only_from_what_others_call_the_author() -> None:
    channel = ChannelAliases()
    for who, text in _chat():
        channel.learn(who.lower(), who, text)
    assert channel.of("rosalind") == ["roz"]
    assert channel.of("roz") == ["rosalind"]
    # "road" shares "ro" with "Rosalind", but she says it herself.
    assert "road" not in channel.of("rosalind")
    assert channel.of("bart") == [] and channel.of("quiz") == []


def test_stated_aliases_are_taken_at_once() -> None:
    channel = ChannelAliases()
    channel.learn("t", "Thaddeus", "Please just call me Tad, everyone does.")
    channel.learn("r", "Rosalind", "My cousin Augustin (Gus) is visiting.")
    assert channel.of("thaddeus") == ["tad"] and channel.of("tad") == ["thaddeus"]
    assert channel.of("gus") == ["augustin"]
    # "X (Y)" that is no short form ("the meeting (Tuesday)") teaches nothing.
    channel.learn("r", "Rosalind", "the meeting (Tuesday) moved")
    assert channel.of("meeting") == []


def test_korean_names_need_no_capitals() -> None:
    channel = ChannelAliases()
    for i in range(6):
        channel.learn("a", "김민수", f"오늘 날씨 좋다 {i}")
        channel.learn("b" if i % 2 else "c", "이지은" if i % 2 else "박서준",
                      f"민수 내일 와? {i}")
    assert short_form("민수", "김민수")
    assert channel.of("김민수") == ["민수"]
    aliases = Aliases()
    aliases.learn(KEY, "a", "김민수", "저를 지은이라고 불러요")
    assert aliases.expand(KEY, ["김민", "민수", "어디"])[:3] == ["김민", "민수", "어디"]


def test_expand_puts_aliases_after_their_name_and_leaves_other_channels_alone() -> None:
    aliases = Aliases()
    for who, text in _chat():
        aliases.learn(KEY, who.lower(), who, text)
    assert aliases.expand(KEY, ["rosalind", "puppy"]) == ["rosalind", "roz", "puppy"]
    other = ChannelKey("discord", "g", "other")
    assert aliases.expand(other, ["rosalind", "puppy"]) == ["rosalind", "puppy"]


def test_a_huge_one_word_message_is_learned_in_linear_time() -> None:
    """An unbounded "X (Y)" pattern tried every start and length of a 1,000,000-letter
    word (quadratic: the record path hung)."""
    channel = ChannelAliases()
    channel.learn("a", "Ana", "x" * 1_000_000 + " (xy)")
    channel.learn("a", "Ana", "Augustin" + "q" * 50 + " (Gus) and Augustin (Gus)")
    assert channel.of("gus") == ["augustin"]


def test_variants_are_the_other_forms_of_a_capitalised_name() -> None:
    channel = ChannelAliases()
    for text in ["Percy, my cousin, got in", "Percival found a room", "Looked up Augustin's band",
                 "Gus plays bass", "Hetty and Henrietta", "percussion practice", "김민수 왔어"]:
        channel.learn("u1", "Ana", text)
    assert channel.variants("percy") == ["percival"]
    assert channel.variants("percival") == ["percy"]
    assert channel.variants("gus") == ["augustin"]
    assert channel.variants("hetty") == []  # two shared letters join strangers
    assert channel.variants("percussion") == []  # never written capitalised
    assert channel.variants("김민수") == []
    assert name_variant("sandy", "lysander") and not name_variant("al", "alexander")
