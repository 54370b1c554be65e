"""The summary-history part of the ``Store`` contract (``memory.store.InspectStore``).

``StoreContract`` inherits it, so every backend runs it against its own ``store`` fixture.
"""

from __future__ import annotations

import pytest

from memory.models import ChannelKey, NewTurn
from memory.store import Store

__all__ = ["HistoryContract"]

A = ChannelKey("discord", "h1", "c1")
B = ChannelKey("discord", "h1", "c2")


async def _turns(store: Store, key: ChannelKey, n: int, start: int = 0) -> list[int]:
    seqs = []
    for i in range(start, start + n):
        t = NewTurn(key, f"h{key.channel}-{i}", "user", "u", "U", f"turn {i}", 2,
                    1_700_000_000.0 + i)
        seqs.append((await store.record(t)).turn.seq)
    return seqs


async def _commit(store: Store, key: ChannelKey, through: int, text: str, now: float) -> bool:
    state = await store.state(key)
    return await store.commit_summary(key, expected_version=state.version, text=text,
                                      folded_through=through, facts=(), now=now)


class HistoryContract:
    """Summary history, the operator's summary edit and channel overviews."""

    async def test_each_commit_is_a_version_with_its_folded_range(self, store: Store) -> None:
        seqs = await _turns(store, A, 6)
        assert await _commit(store, A, seqs[1], "first", 10.0)
        assert await _commit(store, A, seqs[4], "second", 20.0)
        versions = await store.summary_history_of(A)
        assert [v.text for v in versions] == ["second", "first"]
        assert [(v.first_seq, v.last_seq) for v in versions] == [
            (seqs[2], seqs[4]), (seqs[0], seqs[1])]
        assert [v.committed_at for v in versions] == [20.0, 10.0]
        assert versions[0].version == (await store.state(A)).version
        assert {v.source for v in versions} == {"compaction"}
        assert versions[0].folded == 3

    async def test_a_stale_commit_leaves_no_version(self, store: Store) -> None:
        seqs = await _turns(store, A, 4)
        stale = (await store.state(A)).version
        assert await _commit(store, A, seqs[0], "first", 1.0)
        assert not await store.commit_summary(A, expected_version=stale, text="late",
                                              folded_through=seqs[2], facts=(), now=2.0)
        assert [v.text for v in await store.summary_history_of(A)] == ["first"]

    async def test_edit_is_a_new_version_and_keeps_the_fold(self, store: Store) -> None:
        seqs = await _turns(store, A, 4)
        assert await _commit(store, A, seqs[1], "model text", 1.0)
        before = await store.state(A)
        ok = await store.edit_summary(A, expected_version=before.version, text="operator text",
                                      now=5.0, author="127.0.0.1")
        assert ok
        after = await store.state(A)
        assert after.text == "operator text" and after.version > before.version
        assert after.folded_through == before.folded_through
        assert after.compactions == before.compactions
        newest = (await store.summary_history_of(A))[0]
        assert (newest.source, newest.author, newest.text) == ("edit", "127.0.0.1",
                                                                "operator text")
        assert newest.folded == 0 and newest.version == after.version

    async def test_edit_and_compaction_never_overwrite_each_other(self, store: Store) -> None:
        seqs = await _turns(store, A, 6)
        read = await store.state(A)  # both the operator and a compaction read this version
        assert await store.edit_summary(A, expected_version=read.version, text="edited", now=1.0)
        # the compaction that read the same version must not overwrite the edit
        assert not await store.commit_summary(A, expected_version=read.version, text="model",
                                              folded_through=seqs[2], facts=(), now=2.0)
        assert (await store.state(A)).text == "edited"
        # and the other way round: an edit of a version a compaction moved on is refused
        read = await store.state(A)
        assert await _commit(store, A, seqs[3], "model", 3.0)
        assert not await store.edit_summary(A, expected_version=read.version, text="late",
                                            now=4.0)
        assert (await store.state(A)).text == "model"
        assert [v.text for v in await store.summary_history_of(A)] == ["model", "edited"]

    async def test_edit_of_an_unknown_channel_is_refused(self, store: Store) -> None:
        assert not await store.edit_summary(ChannelKey("x", "y", "z"), expected_version=0,
                                            text="t", now=1.0)

    async def test_history_keeps_the_newest_versions_only(self, store: Store) -> None:
        store.summary_history = 3  # type: ignore[attr-defined]
        seqs = await _turns(store, A, 8)
        for i, seq in enumerate(seqs[:6]):
            assert await _commit(store, A, seq, f"v{i}", float(i))
        assert [v.text for v in await store.summary_history_of(A)] == ["v5", "v4", "v3"]
        assert len(await store.summary_history_of(A, limit=2)) == 2

    @pytest.mark.parametrize("keep", [0])
    async def test_history_can_be_off(self, store: Store, keep: int) -> None:
        store.summary_history = keep  # type: ignore[attr-defined]
        seqs = await _turns(store, A, 2)
        assert await _commit(store, A, seqs[0], "v", 1.0)
        assert await store.summary_history_of(A) == []

    async def test_reset_deletes_one_channels_history(self, store: Store) -> None:
        a, b = await _turns(store, A, 2), await _turns(store, B, 2)
        assert await _commit(store, A, a[0], "a", 1.0)
        assert await _commit(store, B, b[0], "b", 1.0)
        await store.reset(A)
        assert await store.summary_history_of(A) == []
        assert [v.text for v in await store.summary_history_of(B)] == ["b"]

    async def test_overview_counts_every_channel(self, store: Store) -> None:
        a = await _turns(store, A, 5)
        await _turns(store, B, 1)
        assert await _commit(store, A, a[1], "a", 7.0)
        rows = {r.key: r for r in await store.channel_overview()}
        ra, rb = rows[A], rows[B]
        assert (ra.turns, ra.pending, ra.last_compacted_at) == (5, 3, 7.0)
        assert ra.last_activity == 1_700_000_004.0
        assert ra.oldest_pending_at == 1_700_000_002.0
        assert (rb.turns, rb.pending, rb.last_compacted_at) == (1, 1, None)
        await store.reset(A)
        ra = {r.key: r for r in await store.channel_overview()}[A]
        assert (ra.turns, ra.pending, ra.last_activity, ra.oldest_pending_at) == (0, 0, None,
                                                                                  None)

    async def test_replace_history_copies_versions(self, store: Store) -> None:
        a = await _turns(store, A, 3)
        assert await _commit(store, A, a[0], "one", 1.0)
        assert await _commit(store, A, a[1], "two", 2.0)
        versions = await store.summary_history_of(A)
        await store.replace_history(B, versions)
        await store.replace_history(B, versions)  # idempotent
        copied = await store.summary_history_of(B)
        assert [(v.text, v.version, v.first_seq, v.last_seq, v.committed_at, v.source)
                for v in copied] == [(v.text, v.version, v.first_seq, v.last_seq,
                                      v.committed_at, v.source) for v in versions]
