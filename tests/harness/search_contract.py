"""The store contract's part about what the turn search matches and how it ranks: people's
messages before the bot's replies, inflected words found by their stem, the same on every
backend. Mixed into ``StoreContract``."""

from __future__ import annotations

import itertools

from memory.models import ChannelKey, NewTurn, Role
from memory.search_text import query_terms
from memory.store import Store

__all__ = ["SearchContract"]

K = ChannelKey("discord", "search", "c1")
_ids = itertools.count()


def _turn(text: str, role: Role = "user", author: str = "ana") -> NewTurn:
    return NewTurn(K, f"s{next(_ids)}", role, author, author.title(), text,
                   max(1, len(text) // 4), 1_700_000_000.0)


class SearchContract:
    """Turn search semantics every backend shares (``search_turns``)."""

    async def test_search_turns_ranks_peoples_messages_before_the_bots(
        self, store: Store
    ) -> None:
        """The bot's replies restate the question's words better than the message that
        holds the answer (a weak model copies them): they come after people's matches
        (on SQLite, among the best ``RERANK`` times ``limit`` by BM25)."""
        for i in range(20):
            await store.record(_turn(f"harbour office standup team moved {i} harbour office",
                                     role="assistant", author="gistbot"))
        said = (await store.record(_turn("the standup is in the harbour office"))).turn
        for i in range(5):
            await store.record(_turn(f"lunch plan {i}"))
        found = await store.search_turns(K, query_terms("which harbour office standup?"),
                                         before_seq=100, limit=10)
        assert found and found[0].seq == said.seq, [(t.seq, t.role) for t in found]
        assert [t.role for t in found[1:]] == ["assistant"] * (len(found) - 1)

    async def test_search_turns_finds_other_forms_of_a_word(self, store: Store) -> None:
        """Inflections match (both backends stem English); CJK bigrams still do."""
        cooking = (await store.record(_turn("I was cooking pasta for the whole team"))).turn
        fan = (await store.record(_turn("the ceiling fan in the studio broke"))).turn
        ko = (await store.record(_turn("프로젝트 마감은 금요일입니다"))).turn
        for i in range(5):
            await store.record(_turn(f"lunch plan {i}"))
        for question, turn in (("who cooked?", cooking), ("what about the fans", fan),
                               ("마감 언제야?", ko), ("cooks pasta", cooking)):
            found = await store.search_turns(K, query_terms(question), before_seq=100)
            assert found[:1] == [turn], (question, [t.text for t in found])
