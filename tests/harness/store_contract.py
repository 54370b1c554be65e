"""The ``Store`` contract: one behaviour every backend (SQLite, PostgreSQL) must show.

Use it by subclassing ``StoreContract`` in a ``test_*.py`` module and overriding the
``make_store`` fixture: an async factory that opens a new ``Store`` on the *same* backing
database each time it is called (the durability tests close one store and open another),
starting from an empty database for each test, and that closes what it opened at teardown::

    class TestSqliteStore(StoreContract):
        @pytest.fixture
        async def make_store(self, tmp_path): ...

Nothing here knows which backend runs it: only the ``Store`` protocol is used.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

import pytest

from memory.errors import AnsweredTurnGone
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    NewEpisode,
    NewLongTermFact,
    NewTurn,
    Role,
    Turn,
    TurnRef,
)
from memory.search_text import query_terms
from memory.store import Store
from memory.text import clean_text
from tests.harness.amend_contract import AmendContract
from tests.harness.catchup_contract import CatchupContract
from tests.harness.embedding_contract import EmbeddingContract
from tests.harness.history_contract import HistoryContract
from tests.harness.search_contract import SearchContract

__all__ = ["MakeStore", "StoreContract", "new_turn"]

MakeStore = Callable[[], Awaitable[Store]]

A = ChannelKey("discord", "g1", "c1")
B = ChannelKey("discord", "g1", "c2")
SLACK = ChannelKey("slack", "T1", "c1")  # same channel id, other platform
UNKNOWN = ChannelKey("discord", "nope", "nope")
_ids = itertools.count()


def new_turn(
    key: ChannelKey,
    message_id: str | None = None,
    text: str = "hello",
    *,
    role: Role = "user",
    author: str = "alice",
    tokens: int | None = None,
    sent_at: float = 1_700_000_000.0,
) -> NewTurn:
    """A turn to record; tokens default to a cheap stand-in (stores only keep the number)."""
    return NewTurn(
        key=key,
        message_id=message_id if message_id is not None else f"m{next(_ids)}",
        role=role,
        author_id=author,
        author_name=author.title(),
        text=text,
        tokens=tokens if tokens is not None else max(1, len(text) // 4),
        sent_at=sent_at,
    )


async def _fill(store: Store, key: ChannelKey, n: int, **kw: object) -> list[int]:
    """Record ``n`` turns one after another; return their seqs."""
    seqs = []
    for i in range(n):
        res = await store.record(new_turn(key, f"{key.channel}-{i}", f"turn {i}", **kw))  # type: ignore[arg-type]
        seqs.append(res.turn.seq)
    return seqs


def got_seqs(turns: list[Turn]) -> set[int]:
    """The seqs of ``turns``."""
    return {t.seq for t in turns}


async def _fold(store: Store, key: ChannelKey, through: int, text: str = "S", **kw: object) -> None:
    state = await store.state(key)
    ok = await store.commit_summary(
        key,
        expected_version=state.version,
        text=text,
        folded_through=through,
        facts=kw.pop("facts", ()),  # type: ignore[arg-type]
        now=float(kw.pop("now", 1.0)),  # type: ignore[arg-type]
    )
    assert ok


class StoreContract(HistoryContract, CatchupContract, SearchContract, EmbeddingContract,
                    AmendContract):
    """The memory store's contract suite (summary history: ``HistoryContract``; turns by
    time: ``CatchupContract``; what the turn search matches: ``SearchContract``; turn
    vectors: ``EmbeddingContract``; text that arrives for a turn later: ``AmendContract``).
    The roles that are not memory have their own (``roles_contract``). Subclasses override
    ``make_store``; see the module docstring."""

    @pytest.fixture
    async def make_store(self) -> AsyncIterator[MakeStore]:
        raise NotImplementedError("a backend's test module must override make_store")
        yield  # pragma: no cover

    @pytest.fixture
    async def store(self, make_store: MakeStore) -> Store:
        return await make_store()

    # -------------------------------------------------------------------- record

    async def test_is_a_store(self, store: Store) -> None:
        assert isinstance(store, Store)

    async def test_record_assigns_increasing_seqs(self, store: Store) -> None:
        seqs = await _fill(store, A, 5)
        assert seqs == sorted(seqs) and len(set(seqs)) == 5 and seqs[0] >= 1
        turns = await store.turns(A)
        assert [t.seq for t in turns] == seqs
        assert [t.text for t in turns] == [f"turn {i}" for i in range(5)]

    async def test_record_keeps_every_field(self, store: Store) -> None:
        nt = new_turn(A, "x1", "hi there", role="assistant", author="gistbot", tokens=7,
                      sent_at=123.5)
        res = await store.record(nt)
        assert res.created
        t = res.turn
        assert (t.key, t.message_id, t.role, t.author_id, t.author_name, t.text, t.tokens,
                t.sent_at) == (A, "x1", "assistant", "gistbot", "Gistbot", "hi there", 7, 123.5)
        assert (await store.turns(A)) == [t]

    async def test_record_is_idempotent_on_message_id(self, store: Store) -> None:
        first = await store.record(new_turn(A, "dup", "original"))
        again = await store.record(new_turn(A, "dup", "a redelivery with other text"))
        assert first.created and not again.created
        assert again.turn == first.turn
        assert [t.text for t in await store.turns(A)] == ["original"]
        assert await store.pending_size(A) == (1, first.turn.tokens)

    async def test_pending_hint_bounds_the_unfolded_count(self, store: Store) -> None:
        seqs = await _fill(store, A, 6)
        await _fold(store, A, seqs[3])
        res = await store.record(new_turn(A, "after-fold", "x"))
        count, _ = await store.pending_size(A)
        assert res.pending_hint is not None
        assert res.pending_hint >= count == 3  # two left verbatim plus the new one
        await store.delete(A, f"{A.channel}-5")
        again = await store.record(new_turn(A, "after-delete", "y"))
        assert again.pending_hint is not None
        assert again.pending_hint >= (await store.pending_size(A))[0]

    async def test_a_created_turn_carries_the_exact_pending_size(self, store: Store) -> None:
        """Read in the insert's transaction, what compaction checks instead of a read of
        its own: right after a fold, a delete, an edit and a reset; none for a duplicate."""
        seqs = await _fill(store, A, 6)
        first = await store.record(new_turn(A, "p0", "x"))
        assert first.pending == await store.pending_size(A) == (7, 7 * first.turn.tokens)
        await _fold(store, A, seqs[3])
        res = await store.record(new_turn(A, "p1", "y"))
        assert res.pending == await store.pending_size(A)
        assert res.pending is not None and res.pending[0] == 4  # two verbatim, p0, p1
        await store.delete(A, f"{A.channel}-5")
        await store.edit(A, "p0", "a much longer text than before", 40)
        res = await store.record(new_turn(A, "p2", "z"))
        assert res.pending == await store.pending_size(A)
        again = await store.record(new_turn(A, "p2", "z"))
        assert not again.created and again.pending is None
        await store.reset(A)
        res = await store.record(new_turn(A, "p3", "after the reset"))
        assert res.pending == (1, res.turn.tokens) == await store.pending_size(A)

    async def test_record_is_idempotent_within_one_concurrent_batch(self, store: Store) -> None:
        dups = [new_turn(A, "same", f"copy {i}") for i in range(20)]
        others = [new_turn(A, f"o{i}", f"other {i}") for i in range(20)]
        mixed = [x for pair in zip(dups, others, strict=True) for x in pair]
        results = await asyncio.gather(*(store.record(t) for t in mixed))
        same = [r for r in results if r.turn.message_id == "same"]
        assert sum(r.created for r in same) == 1
        assert len({r.turn.seq for r in same}) == 1
        assert all(r.created for r in results if r.turn.message_id != "same")
        turns = await store.turns(A)
        assert len(turns) == 21
        assert len({t.seq for t in turns}) == 21
        assert sorted(t.message_id for t in turns) == sorted({t.message_id for t in mixed})

    async def test_concurrent_records_in_many_channels_get_per_channel_seqs(
        self, store: Store
    ) -> None:
        keys = [ChannelKey("discord", "g", f"c{i}") for i in range(10)]
        turns = [new_turn(k, f"m{j}") for j in range(10) for k in keys]
        await asyncio.gather(*(store.record(t) for t in turns))
        for k in keys:
            stored = await store.turns(k)
            assert [t.message_id for t in stored] == [f"m{j}" for j in range(10)]
            seqs = [t.seq for t in stored]
            assert seqs == sorted(seqs) and len(set(seqs)) == 10

    async def test_same_message_id_in_other_channels_is_another_turn(self, store: Store) -> None:
        a = await store.record(new_turn(A, "m", "in A"))
        b = await store.record(new_turn(B, "m", "in B"))
        s = await store.record(new_turn(SLACK, "m", "in slack"))
        assert a.created and b.created and s.created
        assert [t.text for t in await store.turns(A)] == ["in A"]
        assert [t.text for t in await store.turns(B)] == ["in B"]
        assert [t.text for t in await store.turns(SLACK)] == ["in slack"]

    async def test_record_does_not_change_the_version(self, store: Store) -> None:
        await _fill(store, A, 1)
        before = (await store.state(A)).version
        await _fill(store, A, 3)
        assert (await store.state(A)).version == before

    async def test_record_is_visible_to_another_store_at_once(
        self, store: Store, make_store: MakeStore
    ) -> None:
        res = await store.record(new_turn(A, "visible", "committed before return"))
        other = await make_store()
        assert await other.turns(A) == [res.turn]

    @pytest.mark.parametrize(
        "text",
        [
            "안녕하세요, 주문번호 ORD-7731로 문의드립니다. 내일까지 확인 부탁드려요!",
            "こんにちは、チケット番号はINC0012345です。",
            "ship it 🚀🔥 👨‍👩‍👧‍👦 🇰🇷 é ñ",
            "line one\nline two\r\n\ttabbed",
            "",
            "   ",
        ],
        ids=["korean", "japanese", "emoji", "whitespace-mix", "empty", "blank"],
    )
    async def test_text_round_trips(self, store: Store, text: str) -> None:
        res = await store.record(new_turn(A, "t", text, tokens=3))
        assert res.turn.text == text
        assert (await store.turns(A))[0].text == text
        assert (await store.pending(A))[0].text == text

    async def test_one_megabyte_text_round_trips(self, store: Store) -> None:
        text = ("가나다 abc 🚀 " * 100_000)[: 1_000_000]
        assert len(text.encode("utf-8")) > 1_000_000
        await store.record(new_turn(A, "big", text, tokens=400_000))
        (turn,) = await store.turns(A)
        assert turn.text == text and turn.tokens == 400_000

    async def test_cleaned_nul_and_surrogates_round_trip(self, store: Store) -> None:
        text = clean_text("a\x00b \ud83d lone, pair \ud83d\ude80 end")
        assert "\x00" not in text
        await store.record(new_turn(A, "nul", text))
        assert (await store.turns(A))[0].text == text == "a\ufffdb \ufffd lone, pair 🚀 end"

    # -------------------------------------------------------------------- unknown channel

    async def test_unknown_channel_is_empty(self, store: Store) -> None:
        await _fill(store, A, 2)  # other channels exist; this one does not
        state = await store.state(UNKNOWN)
        assert (state.key, state.text, state.version, state.folded_through, state.facts) == (
            UNKNOWN, "", 0, 0, ()
        )
        assert await store.snapshot(UNKNOWN, limit=10) == (state, [])
        assert await store.pending(UNKNOWN) == []
        assert await store.pending_size(UNKNOWN) == (0, 0)
        assert await store.turns(UNKNOWN) == []
        stats = await store.stats(UNKNOWN)
        assert (stats.key, stats.turns, stats.folded, stats.pending, stats.facts,
                stats.compactions, stats.last_compacted_at) == (UNKNOWN, 0, 0, 0, 0, 0, None)
        assert await store.edit(UNKNOWN, "m", "x", 1) == "missing"
        assert await store.delete(UNKNOWN, "m") == "missing"
        reset = await store.reset(UNKNOWN)
        assert (reset.turns, reset.had_summary, reset.facts) == (0, False, 0)
        assert not await store.commit_summary(
            UNKNOWN, expected_version=0, text="S", folded_through=1, facts=(), now=1.0
        )
        assert UNKNOWN not in await store.channels()

    # -------------------------------------------------------------------- commit_summary

    async def test_commit_folds_and_bumps_the_version(self, store: Store) -> None:
        seqs = await _fill(store, A, 6)
        before = await store.state(A)
        ok = await store.commit_summary(
            A, expected_version=before.version, text="## Topics\n- greetings",
            folded_through=seqs[3], facts=(), now=42.0,
        )
        assert ok
        after = await store.state(A)
        assert after.text == "## Topics\n- greetings"
        assert after.folded_through == seqs[3]
        assert after.version > before.version
        assert after.last_compacted_at == 42.0
        assert after.compactions == before.compactions + 1
        assert [t.seq for t in await store.pending(A)] == seqs[4:]
        assert await store.pending_size(A) == (2, sum(t.tokens for t in (await store.pending(A))))
        # compaction never deletes turns: the folded ones stay as the archive
        assert [t.seq for t in await store.turns(A)] == seqs

    async def test_stale_commit_is_rejected_and_changes_nothing(self, store: Store) -> None:
        seqs = await _fill(store, A, 6)
        stale = (await store.state(A)).version
        await _fold(store, A, seqs[1], "first")
        current = await store.state(A)
        ok = await store.commit_summary(
            A, expected_version=stale, text="late", folded_through=seqs[4],
            facts=[CarriedIdentifier("ORD-1", "late", 1, 1)], now=2.0,
        )
        assert not ok
        assert await store.state(A) == current
        assert current.facts == ()

    @pytest.mark.parametrize("change", ["edit", "delete", "reset", "commit"])
    async def test_any_change_voids_an_in_flight_commit(self, store: Store, change: str) -> None:
        seqs = await _fill(store, A, 6)
        read = await store.state(A)  # a compaction reads the state ...
        if change == "edit":  # ... and meanwhile the channel changes
            assert await store.edit(A, "c1-2", "edited", 1) == "updated"
        elif change == "delete":
            assert await store.delete(A, "c1-2") == "deleted"
        elif change == "reset":
            await store.reset(A)
            await _fill(store, A, 6)  # even when new turns arrive after the reset
        else:
            await _fold(store, A, seqs[0])
        ok = await store.commit_summary(
            A, expected_version=read.version, text="from stale input",
            folded_through=seqs[3], facts=(), now=1.0,
        )
        assert not ok
        assert "from stale input" not in (await store.state(A)).text

    async def test_commit_cannot_move_the_fold_pointer_back_or_past_the_last_turn(
        self, store: Store
    ) -> None:
        seqs = await _fill(store, A, 4)
        await _fold(store, A, seqs[2])
        state = await store.state(A)
        for through in (seqs[1], seqs[-1] + 1, seqs[-1] + 100):
            assert not await store.commit_summary(
                A, expected_version=state.version, text="bad", folded_through=through,
                facts=(), now=1.0,
            ), through
        assert await store.state(A) == state

    async def test_facts_upsert_keeps_the_widest_range_and_order_by_last_mention(
        self, store: Store
    ) -> None:
        seqs = await _fill(store, A, 10)
        await _fold(store, A, seqs[2], facts=[
            CarriedIdentifier("ORD-1", "old context", 3, 5),
            CarriedIdentifier("ORD-2", "two", 2, 2),
            CarriedIdentifier("https://x.example/a", "url", 1, 8),
        ])
        await _fold(store, A, seqs[5], facts=[
            CarriedIdentifier("ORD-1", "new context", 4, 9),  # later first_seq must not win
            CarriedIdentifier("ORD-2", "two again", 1, 1),  # earlier last_seen must not win
            CarriedIdentifier("`blue-fox`", "code name", 6, 6),
        ])
        state = await store.state(A)
        by_value = {f.value: f for f in state.facts}
        assert by_value["ORD-1"] == CarriedIdentifier("ORD-1", "new context", 3, 9)
        assert (by_value["ORD-2"].first_seq, by_value["ORD-2"].last_seen_seq) == (1, 2)
        url = "https://x.example/a"
        assert by_value[url] == CarriedIdentifier(url, "url", 1, 8)
        assert [f.value for f in state.facts] == [
            "ORD-1", "https://x.example/a", "`blue-fox`", "ORD-2"
        ]
        limited = await store.state(A, facts_limit=2)
        assert [f.value for f in limited.facts] == ["ORD-1", "https://x.example/a"]
        assert (await store.stats(A)).facts == 4

    # -------------------------------------------------------------------- edit / delete

    async def test_edit_and_delete_outcomes(self, store: Store) -> None:
        seqs = await _fill(store, A, 6)
        await _fold(store, A, seqs[2])
        v = (await store.state(A)).version

        assert await store.edit(A, "c1-4", "edited text", 99) == "updated"
        edited = [t for t in await store.pending(A) if t.message_id == "c1-4"]
        assert [(t.text, t.tokens, t.seq) for t in edited] == [("edited text", 99, seqs[4])]
        v2 = (await store.state(A)).version
        assert v2 > v

        assert await store.delete(A, "c1-5") == "deleted"
        assert "c1-5" not in [t.message_id for t in await store.turns(A)]
        assert (await store.state(A)).version > v2

        assert await store.edit(A, "c1-1", "too late", 1) == "folded"
        assert await store.delete(A, "c1-0") == "folded"
        archived = {t.message_id: t.text for t in await store.turns(A)}
        assert archived["c1-1"] == "turn 1" and archived["c1-0"] == "turn 0"

        assert await store.edit(A, "never-seen", "x", 1) == "missing"
        assert await store.delete(A, "never-seen") == "missing"
        assert await store.delete(A, "c1-5") == "missing"  # already deleted

    async def test_deleted_seq_is_not_reused(self, store: Store) -> None:
        seqs = await _fill(store, A, 3)
        assert await store.delete(A, "c1-2") == "deleted"
        res = await store.record(new_turn(A, "after"))
        assert res.turn.seq > seqs[-1]

    # -------------------------------------------------------------------- reset

    async def test_reset_deletes_one_channel_only(self, store: Store) -> None:
        a_seqs = await _fill(store, A, 5)
        b_seqs = await _fill(store, B, 5)
        await _fill(store, SLACK, 2)
        await _fold(store, A, a_seqs[2], "summary A", facts=[CarriedIdentifier("ORD-9", "a", 1, 1)])
        await _fold(store, B, b_seqs[2], "summary B", facts=[CarriedIdentifier("ORD-8", "b", 1, 1)])
        before_b = await store.state(B)
        before_b_turns = await store.turns(B)
        v = (await store.state(A)).version

        result = await store.reset(A)
        assert (result.turns, result.had_summary, result.facts) == (5, True, 1)
        state = await store.state(A)
        assert (state.text, state.facts, state.compactions) == ("", (), 0)
        assert state.version > v
        assert await store.turns(A) == []
        assert await store.pending(A) == []
        assert await store.pending_size(A) == (0, 0)
        assert (await store.stats(A)).turns == 0

        assert await store.state(B) == before_b
        assert await store.turns(B) == before_b_turns
        assert len(await store.turns(SLACK)) == 2

    async def test_after_reset_new_turns_are_pending_with_higher_seqs(self, store: Store) -> None:
        seqs = await _fill(store, A, 4)
        await _fold(store, A, seqs[1])
        await store.reset(A)
        again = await store.record(new_turn(A, "c1-0", "same id as before the reset"))
        assert again.created  # the old message is gone, so it is recorded anew
        assert again.turn.seq > seqs[-1]
        assert await store.pending(A) == [again.turn]
        again_reset = await store.reset(A)
        assert (again_reset.turns, again_reset.had_summary) == (1, False)

    # -------------------------------------------------------------------- answers

    @pytest.mark.parametrize("forget", ["reset", "delete"])
    async def test_an_answer_to_a_forgotten_turn_records_nothing(
        self, store: Store, forget: str
    ) -> None:
        asked = (await store.record(new_turn(A, "q1", "the code is 0451"))).turn
        if forget == "reset":
            await store.reset(A)
        else:
            assert await store.delete(A, "q1") == "deleted"
        version = (await store.state(A)).version
        answer = replace(new_turn(A, "reply:q1", "noted", role="assistant"),
                         answers=TurnRef(asked.seq, "q1"))
        with pytest.raises(AnsweredTurnGone):
            await store.record(answer)
        assert await store.turns(A) == []
        assert (await store.state(A)).version == version
        after = await store.record(new_turn(A, "q2"))
        assert after.turn.seq == asked.seq + 1  # the refused answer took no seq

    async def test_an_answer_is_recorded_while_its_turn_is_stored(self, store: Store) -> None:
        asked = (await store.record(new_turn(A, "q1"))).turn
        await store.record(new_turn(A, "q2"))
        answer = replace(new_turn(A, "reply:q1", "noted", role="assistant"),
                         answers=TurnRef(asked.seq, "q1"))
        first = await store.record(answer)
        assert first.created and first.turn.seq == asked.seq + 2
        again = await store.record(answer)  # idempotent like any record
        assert (again.created, again.turn) == (False, first.turn)
        assert [t.message_id for t in await store.turns(A)] == ["q1", "q2", "reply:q1"]

    async def test_an_answer_names_its_turn_by_seq_and_message_id(self, store: Store) -> None:
        asked = (await store.record(new_turn(A, "q1"))).turn
        other = replace(new_turn(A, "reply:x", role="assistant"),
                        answers=TurnRef(asked.seq, "another message"))
        with pytest.raises(AnsweredTurnGone):
            await store.record(other)
        elsewhere = replace(new_turn(B, "reply:q1", role="assistant"),
                            answers=TurnRef(asked.seq, "q1"))
        with pytest.raises(AnsweredTurnGone):  # a channel with no row at all
            await store.record(elsewhere)
        assert [t.message_id for t in await store.turns(A)] == ["q1"]
        assert await store.turns(B) == []
        assert B not in await store.channels()

    # -------------------------------------------------------------------- reads

    async def test_snapshot_limit_and_through_seq(self, store: Store) -> None:
        seqs = await _fill(store, A, 10)
        await _fold(store, A, seqs[2], "S")
        state, turns = await store.snapshot(A, limit=3)
        assert state == await store.state(A)
        assert [t.seq for t in turns] == seqs[7:]
        _, turns = await store.snapshot(A, limit=100)
        assert [t.seq for t in turns] == seqs[3:]
        _, turns = await store.snapshot(A, limit=3, through_seq=seqs[6])
        assert [t.seq for t in turns] == seqs[4:7]
        _, turns = await store.snapshot(A, limit=10, through_seq=seqs[1])  # all folded
        assert turns == []
        _, turns = await store.snapshot(A, limit=0)
        assert turns == []

    async def test_pending_is_oldest_first_with_limit(self, store: Store) -> None:
        seqs = await _fill(store, A, 8)
        await _fold(store, A, seqs[1])
        assert [t.seq for t in await store.pending(A)] == seqs[2:]
        assert [t.seq for t in await store.pending(A, limit=3)] == seqs[2:5]

    async def test_turns_exports_everything_in_order(self, store: Store) -> None:
        seqs = await _fill(store, A, 7)
        await _fold(store, A, seqs[3])
        assert [t.seq for t in await store.turns(A)] == seqs
        assert [t.seq for t in await store.turns(A, after_seq=seqs[2])] == seqs[3:]
        assert [t.seq for t in await store.turns(A, after_seq=seqs[1], limit=2)] == seqs[2:4]

    async def test_stats_counts(self, store: Store) -> None:
        seqs = await _fill(store, A, 6, tokens=5)
        await _fold(store, A, seqs[3], facts=[CarriedIdentifier("#4411", "x", 1, 1)], now=77.0)
        stats = await store.stats(A)
        state = await store.state(A)
        assert (stats.turns, stats.folded, stats.pending, stats.pending_tokens) == (6, 4, 2, 10)
        assert (stats.facts, stats.compactions, stats.last_compacted_at) == (1, 1, 77.0)
        assert stats.version == state.version

    async def test_channels_lists_every_channel_with_state(self, store: Store) -> None:
        assert await store.channels() == []
        await _fill(store, A, 1)
        await _fill(store, SLACK, 1)
        await _fill(store, B, 1)
        assert sorted(await store.channels()) == sorted([A, B, SLACK])

    async def test_newest_message_ids_are_user_turns_newest_seq_first(self, store: Store) -> None:
        assert await store.newest_message_ids(A) == []
        for i in range(5):
            await store.record(new_turn(A, f"u{i}"))
            await store.record(new_turn(A, f"reply:u{i}", role="assistant"))
        await store.record(new_turn(B, "other"))
        await _fold(store, A, 6)  # folded turns still count: they were seen
        assert await store.newest_message_ids(A, limit=3) == ["u4", "u3", "u2"]
        assert await store.newest_message_ids(A) == ["u4", "u3", "u2", "u1", "u0"]
        assert await store.newest_message_ids(UNKNOWN) == []

    # -------------------------------------------------------------------- retention

    async def test_purge_deletes_only_old_folded_turns(self, store: Store) -> None:
        old, new = 1_000.0, 9_000.0
        a = [(await store.record(new_turn(A, f"a{i}", sent_at=old))).turn.seq for i in range(4)]
        a += [(await store.record(new_turn(A, f"a{i}", sent_at=new))).turn.seq for i in range(4, 6)]
        b = [(await store.record(new_turn(B, f"b{i}", sent_at=old))).turn.seq for i in range(3)]
        await _fold(store, A, a[4])  # folded: a0..a3 (old) and a4 (new)
        await _fold(store, B, b[0])  # folded: b0 (old); b1, b2 old but unfolded
        purged = await store.purge_folded_before(5_000.0)
        assert purged == 5
        assert [t.message_id for t in await store.turns(A)] == ["a4", "a5"]
        assert [t.message_id for t in await store.turns(B)] == ["b1", "b2"]
        assert [t.message_id for t in await store.pending(B)] == ["b1", "b2"]
        state_a = await store.state(A)
        assert (state_a.text, state_a.folded_through) == ("S", a[4])
        assert await store.purge_folded_before(5_000.0) == 0

    # -------------------------------------------------------------------- durability

    async def test_everything_survives_close_and_reopen(
        self, store: Store, make_store: MakeStore
    ) -> None:
        texts = ["안녕하세요 👋", "x" * 300_000, clean_text("nul\x00byte"), "plain"]
        recorded = [(await store.record(new_turn(A, f"d{i}", t))).turn for i, t in
                    enumerate(texts)]
        await _fold(store, A, recorded[1].seq, "## Facts\n- kept",
                    facts=[CarriedIdentifier("ORD-5", "c", 1, 2)])
        state = await store.state(A)
        await store.close()
        await store.close()  # closing twice is harmless

        reopened = await make_store()
        assert await reopened.turns(A) == recorded
        assert await reopened.state(A) == state
        again = await reopened.record(new_turn(A, "d0", "redelivered after restart"))
        assert not again.created and again.turn == recorded[0]
        nxt = await reopened.record(new_turn(A, "after-restart"))
        assert nxt.turn.seq > recorded[-1].seq

    # -------------------------------------------------------------------- archive

    async def _archive(self, store: Store, key: ChannelKey, text: str) -> None:
        """Fold turns of ``key`` with an episode and a fact whose words are ``text``."""
        seqs = await _fill(store, key, 3)
        state = await store.state(key)
        ok = await store.commit_summary(
            key,
            expected_version=state.version,
            text="S",
            folded_through=seqs[1],
            facts=(),
            now=50.0,
            episode=NewEpisode(seqs[0], seqs[1], 10.0, 20.0, ("Alice", "Bob"), f"Alice: {text}"),
            channel_facts=[NewLongTermFact(f"fact: {text}", (seqs[0],), "Alice")],
        )
        assert ok

    async def test_commit_archives_episode_and_facts_atomically(self, store: Store) -> None:
        await self._archive(store, A, "the launch is on 3 March")
        [episode] = await store.episodes(A)
        assert (episode.first_seq, episode.last_seq) == (1, 2)
        assert (episode.started_at, episode.ended_at) == (10.0, 20.0)
        assert episode.speakers == ("Alice", "Bob")
        assert episode.text == "Alice: the launch is on 3 March"
        [fact] = await store.list_facts(A)
        assert (fact.text, fact.source_seqs, fact.author, fact.pinned) == (
            "fact: the launch is on 3 March", (1,), "Alice", False)
        assert fact.created_at == 50.0 and not fact.superseded
        # A stale commit writes neither summary nor archive.
        state = await store.state(A)
        stale = await store.commit_summary(
            A, expected_version=state.version - 1, text="X", folded_through=3, facts=(), now=1.0,
            episode=NewEpisode(3, 3, 1.0, 1.0, ("Bob",), "stale"),
            channel_facts=[NewLongTermFact("stale fact")],
        )
        assert not stale
        assert len(await store.episodes(A)) == 1
        assert len(await store.list_facts(A)) == 1

    async def test_search_ranks_matches_and_marks_superseded(self, store: Store) -> None:
        old = await store.add_fact(A, NewLongTermFact("the deadline is Friday", (3,), "Alice"),
                                   now=1.0)
        await store.add_fact(A, NewLongTermFact("Bob prefers tea"), now=2.0)
        new = await store.add_fact(
            A, NewLongTermFact("the deadline moved to Monday", (9,), "Bob", supersedes=old.id),
            now=3.0,
        )
        recall = await store.search(A, query_terms("when is the deadline?"))
        assert [f.text for f in recall.facts] == [new.text, old.text]
        assert [f.superseded_by for f in recall.facts] == [None, new.id]
        current = await store.search(A, query_terms("deadline"), include_superseded=False)
        assert [f.id for f in current.facts] == [new.id]
        assert (await store.search(A, query_terms("unrelated weather talk"))).facts == ()
        assert (await store.search(A, [])).facts == ()
        listed = await store.list_facts(A)
        assert [f.id for f in listed] == [new.id, listed[1].id, old.id]
        assert [f.id for f in await store.list_facts(A, include_superseded=False)] == [
            new.id, listed[1].id]

    async def test_search_finds_korean_and_japanese_by_short_words(self, store: Store) -> None:
        await store.add_fact(A, NewLongTermFact("프로젝트 마감은 금요일입니다"), now=1.0)
        await store.add_fact(A, NewLongTermFact("締切日は月曜日です"), now=1.0)
        assert [f.text for f in (await store.search(A, query_terms("마감 언제야?"))).facts] == [
            "프로젝트 마감은 금요일입니다"]
        assert [f.text for f in (await store.search(A, query_terms("締切は？"))).facts] == [
            "締切日は月曜日です"]

    async def test_search_and_facts_never_cross_channels(self, store: Store) -> None:
        await self._archive(store, A, "secret plan alpha")
        await self._archive(store, B, "secret plan beta")
        await store.add_fact(SLACK, NewLongTermFact("secret plan gamma"), now=1.0)
        for key, word in ((A, "alpha"), (B, "beta"), (SLACK, "gamma")):
            recall = await store.search(key, query_terms("secret plan alpha beta gamma"))
            texts = [f.text for f in recall.facts] + [e.text for e in recall.episodes]
            assert texts and all(word in t for t in texts), (key, texts)
        assert await store.search(UNKNOWN, query_terms("secret")) == type(
            await store.search(UNKNOWN, []))()
        [fact_b] = await store.list_facts(B)
        assert await store.delete_fact(A, fact_b.id) is None  # not A's fact
        assert [f.id for f in await store.list_facts(B)] == [fact_b.id]
        # Superseding across channels is refused too.
        await store.add_fact(A, NewLongTermFact("override", supersedes=fact_b.id), now=2.0)
        assert not (await store.list_facts(B))[0].superseded

    async def test_delete_fact_removes_it_from_search(self, store: Store) -> None:
        fact = await store.add_fact(A, NewLongTermFact("order 1042 refund approved"), now=1.0)
        assert (await store.search(A, query_terms("refund"))).facts
        deleted = await store.delete_fact(A, fact.id)
        assert deleted is not None and deleted.text == fact.text
        assert await store.delete_fact(A, fact.id) is None
        assert (await store.search(A, query_terms("refund"))).facts == ()
        assert await store.list_facts(A) == []

    async def test_reset_deletes_the_archive_of_one_channel_only(self, store: Store) -> None:
        await self._archive(store, A, "alpha launch")
        await self._archive(store, B, "beta launch")
        await store.add_fact(A, NewLongTermFact("pinned alpha", pinned=True), now=1.0)
        result = await store.reset(A)
        assert (result.episodes, result.channel_facts) == (1, 2)
        assert await store.episodes(A) == [] and await store.list_facts(A) == []
        assert (await store.search(A, query_terms("launch alpha"))).facts == ()
        assert len(await store.episodes(B)) == 1
        assert [f.text for f in (await store.search(B, query_terms("launch"))).facts] == [
            "fact: beta launch"]

    async def test_retention_deletes_old_episodes_but_keeps_facts(self, store: Store) -> None:
        await self._archive(store, A, "ancient history")  # episode ended at 20.0
        await store.purge_folded_before(15.0)
        assert len(await store.episodes(A)) == 1
        await store.purge_folded_before(25.0)
        assert await store.episodes(A) == []
        assert (await store.search(A, query_terms("ancient"))).episodes == ()
        assert len(await store.list_facts(A)) == 1

    async def test_archive_survives_close_and_reopen(
        self, store: Store, make_store: MakeStore
    ) -> None:
        await self._archive(store, A, "durable memory")
        episodes, facts = await store.episodes(A), await store.list_facts(A)
        await store.close()
        reopened = await make_store()
        assert await reopened.episodes(A) == episodes
        assert await reopened.list_facts(A) == facts
        assert (await reopened.search(A, query_terms("durable"))).facts == tuple(facts)

    # -------------------------------------------------------------------- turn search

    async def _history(self, store: Store, key: ChannelKey, n: int) -> Turn:
        """A planted turn at seq 1, then ``n`` ordinary turns (imported in bulk, as copy-db
        writes them), then one recorded live; return the planted turn."""
        planted = (await store.record(new_turn(
            key, "planted", "Refund for the customer charged twice: order ORD-7731, "
            "the courier is Zyxquorp Logistics", sent_at=1_000.0,
        ))).turn
        filler = [
            Turn(key, seq, f"f{seq}", "user", "bob", "Bob",
                 f"standup notes {seq}: roadmap review on thursday, ticket ORD-{seq} moved",
                 12, 1_000.0 + seq)
            for seq in range(2, n + 2)
        ]
        for start in range(0, n, 1000):
            assert await store.import_turns(key, filler[start : start + 1000]) == len(
                filler[start : start + 1000])
        await store.record(new_turn(key, "live", "roadmap looks good"))
        return planted

    async def test_search_turns_finds_a_turn_said_6000_turns_ago(self, store: Store) -> None:
        # more turns than either store's common-term bound (SQLite's is 5,000)
        planted = await self._history(store, A, 6_000)
        now = (await store.turns(A, after_seq=6_000))[-1].seq + 1
        for question in ("who was the courier, Zyxquorp?", "what happened to ORD-7731?",
                         "the customer charged twice, what was the order?"):
            found = await store.search_turns(A, query_terms(question), before_seq=now)
            assert found and found[0] == planted, (question, found[:2])
        # words in most of the 6,000 turns are too common to search by: alone, they recall
        # nothing; beside a rare word, they do not outrank it
        assert await store.search_turns(A, query_terms("roadmap thursday"), before_seq=now) == []
        mixed = await store.search_turns(A, query_terms("roadmap thursday Zyxquorp standup"),
                                         before_seq=now)
        assert mixed == [planted]
        assert await store.search_turns(A, [], before_seq=now) == []
        assert await store.search_turns(A, query_terms("nothing like this"), before_seq=now) == []

    async def test_search_turns_only_before_seq_and_ties_newest_first(self, store: Store) -> None:
        seqs = [(await store.record(new_turn(A, f"s{i}", text))).turn.seq for i, text in
                enumerate(["blue falcon", "unrelated words", "blue falcon", "blue falcon"])]
        found = await store.search_turns(A, query_terms("falcon"), before_seq=seqs[3])
        assert [t.seq for t in found] == [seqs[2], seqs[0]]
        found = await store.search_turns(A, query_terms("falcon"), before_seq=seqs[3] + 1)
        assert [t.seq for t in found] == [seqs[3], seqs[2], seqs[0]]
        assert [t.seq for t in await store.search_turns(
            A, query_terms("falcon"), before_seq=seqs[3] + 1, limit=1)] == [seqs[3]]
        assert await store.search_turns(A, query_terms("falcon"), before_seq=seqs[0]) == []
        assert await store.search_turns(A, query_terms("falcon"), before_seq=1) == []

    async def test_search_turns_with_max_docs_leaves_out_the_commoner_words(
        self, store: Store
    ) -> None:
        # The follow-up search (memory.archive) searches with a hit's rarer words only.
        texts = [f"falcon report {i}" for i in range(12)] + ["falcon harbour kestrel"]
        seqs = [(await store.record(new_turn(A, f"k{i}", text))).turn.seq
                for i, text in enumerate(texts)]
        now = seqs[-1] + 1
        words = ["report", "kestrel"]  # "report" is in 12 turns, "kestrel" in 1
        assert len(await store.search_turns(A, words, before_seq=now)) == 13
        found = await store.search_turns(A, words, before_seq=now, max_docs=5)
        assert [t.seq for t in found] == [seqs[-1]]
        assert await store.search_turns(A, ["report"], before_seq=now, max_docs=5) == []

    async def test_search_turns_never_crosses_channels(self, store: Store) -> None:
        a = (await store.record(new_turn(A, "x", "secret plan alpha"))).turn
        b = (await store.record(new_turn(B, "x", "secret plan beta"))).turn
        s = (await store.record(new_turn(SLACK, "x", "secret plan gamma"))).turn
        query = query_terms("secret plan alpha beta gamma")
        for key, turn in ((A, a), (B, b), (SLACK, s)):
            assert await store.search_turns(key, query, before_seq=100) == [turn]
            assert await store.turns_at(key, [1, 2, 3]) == [turn]
        assert await store.search_turns(UNKNOWN, query, before_seq=100) == []
        assert await store.turns_at(UNKNOWN, [1]) == []

    async def test_search_turns_finds_korean_and_japanese_by_short_words(
        self, store: Store
    ) -> None:
        ko = (await store.record(new_turn(A, "ko", "프로젝트 마감은 금요일입니다"))).turn
        ja = (await store.record(new_turn(A, "ja", "締切日は月曜日です"))).turn
        await store.record(new_turn(A, "en", "the deadline is friday"))
        assert await store.search_turns(A, query_terms("마감 언제야?"), before_seq=10) == [ko]
        assert await store.search_turns(A, query_terms("締切は？"), before_seq=10) == [ja]

    async def test_search_turns_a_name_in_half_the_turns_does_not_rank_them_first(
        self, store: Store
    ) -> None:
        """In a two-person chat the speaker's name (indexed with the text) is in half the
        turns: it tells nothing apart. The turns with the question's telling words come
        first, then the named person's, shortest first (ties: newer), then those sharing
        only the question's common words (``fallback``)."""
        said = [("dave", "ok"), ("dave", "sure"), ("dave", "My usual order at the café is a "
                                                 "cold brew"), ("nate", "the coffee shop closed"),
                ("dave", "yes"), ("dave", "fine by me"), ("nate", "see you at the gym"),
                ("nate", "hello there")]
        seqs = [(await store.record(new_turn(A, f"n{i}", text, author=who))).turn.seq
                for i, (who, text) in enumerate(said)]
        question = "What does Dave normally get at the coffee shop?"
        found = await store.search_turns(A, query_terms(question), before_seq=seqs[-1] + 1,
                                         fallback=query_terms(question, common=True))
        order = [seqs[i] for i in (3, 4, 1, 0, 5, 2, 6)]
        assert [t.seq for t in found] == order
        assert [t.seq for t in await store.search_turns(
            A, query_terms(question), before_seq=seqs[-1] + 1, limit=3,
            fallback=query_terms(question, common=True))] == order[:3]
        # without a fallback the query's own terms are all there is
        found = await store.search_turns(A, query_terms(question), before_seq=seqs[-1] + 1)
        assert [t.seq for t in found] == order[:-1]

    async def test_turns_at_reads_by_seq_ascending(self, store: Store) -> None:
        seqs = await _fill(store, A, 6)
        await _fold(store, A, seqs[3])  # folded turns are read like the others
        got = await store.turns_at(A, [seqs[4], seqs[1], seqs[1], 999, seqs[0]])
        assert [t.seq for t in got] == [seqs[0], seqs[1], seqs[4]]
        assert got == [t for t in await store.turns(A) if t.seq in got_seqs(got)]
        assert await store.turns_at(A, []) == []
        assert await store.turns_at(A, [0, -3, 999]) == []

    async def test_turns_with_ids_reads_by_message_id_in_one_channel_by_seq(
        self, store: Store
    ) -> None:
        seqs = await _fill(store, A, 6)
        await _fold(store, A, seqs[3])  # folded turns are read like the others
        await store.record(new_turn(B, f"{A.channel}-2", "same id, other channel"))
        ids = [f"{A.channel}-4", f"{A.channel}-1", f"{A.channel}-1", "nope", f"{A.channel}-0"]
        got = await store.turns_with_ids(A, ids)
        assert [t.seq for t in got] == [seqs[0], seqs[1], seqs[4]]
        assert got == [t for t in await store.turns(A) if t.seq in got_seqs(got)]
        assert await store.turns_with_ids(A, []) == []
        assert await store.turns_with_ids(UNKNOWN, [f"{A.channel}-1"]) == []
        assert [t.text for t in await store.turns_with_ids(B, [f"{A.channel}-2"])] == [
            "same id, other channel"]

    async def test_turn_search_follows_edit_delete_reset_and_retention(self, store: Store) -> None:
        async def hits(key: ChannelKey, text: str) -> list[str]:
            found = await store.search_turns(key, query_terms(text), before_seq=1000)
            return [t.message_id for t in found]

        await store.record(new_turn(A, "old", "the launch codeword is walrus", sent_at=10.0))
        await store.record(new_turn(A, "e", "we meet at the harbour", sent_at=20.0))
        await store.record(new_turn(A, "d", "bring the umbrella", sent_at=20.0))
        await store.record(new_turn(B, "b", "walrus harbour umbrella", sent_at=20.0))
        assert await store.edit(A, "e", "we meet at the lighthouse", 5) == "updated"
        assert await hits(A, "harbour") == [] and await hits(A, "lighthouse") == ["e"]
        assert await store.delete(A, "d") == "deleted"
        assert await hits(A, "umbrella") == []
        await _fold(store, A, 2)
        assert await store.purge_folded_before(15.0) == 1  # "old", folded and old enough
        assert await hits(A, "walrus") == [] and await hits(A, "lighthouse") == ["e"]
        await store.reset(A)
        assert await hits(A, "lighthouse") == []
        assert await hits(B, "walrus harbour umbrella") == ["b"]
        again = await store.record(new_turn(A, "e", "the lighthouse again"))
        assert await hits(A, "lighthouse") == ["e"]
        assert await store.turns_at(A, [again.turn.seq]) == [again.turn]

    async def test_turn_search_survives_close_and_reopen(
        self, store: Store, make_store: MakeStore
    ) -> None:
        turn = (await store.record(new_turn(A, "k", "durable zeppelin"))).turn
        await store.close()
        reopened = await make_store()
        assert await reopened.search_turns(A, query_terms("zeppelin"), before_seq=9) == [turn]

    # -------------------------------------------------------------------- leases, events

    async def test_lease_is_exclusive_per_channel_until_released_or_expired(
        self, make_store: MakeStore
    ) -> None:
        a, b = await make_store(), await make_store()  # two processes sharing the backend
        assert await a.try_lease(A, "proc-a", ttl=30)
        assert not await b.try_lease(A, "proc-b", ttl=30)
        assert await b.try_lease(B, "proc-b", ttl=30)  # per channel
        assert await a.try_lease(A, "proc-a", ttl=30)  # the holder renews
        assert not await b.release_lease(A, "proc-b")  # not b's to release
        assert await a.release_lease(A, "proc-a")
        assert await b.try_lease(A, "proc-b", ttl=0.2)
        assert not await a.try_lease(A, "proc-a", ttl=30)
        await asyncio.sleep(0.35)  # proc-b "died": its lease runs out
        assert await a.try_lease(A, "proc-a", ttl=30)
        with pytest.raises(ValueError):
            await a.try_lease(A, "x", ttl=0)
