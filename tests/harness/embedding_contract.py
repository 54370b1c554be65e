"""The embedding role of the store contract (``memory.embedding_store``): turn vectors per
model, the nearest-turns scan, and that deleting, editing or resetting drops vectors."""

from __future__ import annotations

import itertools

from memory.embedding_store import EmbeddingStore, pack
from memory.models import ChannelKey, NewTurn, Role, Turn
from memory.store import Store

__all__ = ["EmbeddingContract"]

A = ChannelKey("discord", "g1", "e1")
B = ChannelKey("discord", "g1", "e2")
M = "embed-test"
_ids = itertools.count()


def _axis(i: int, dims: int = 8) -> bytes:
    """A unit vector along axis ``i`` (mod ``dims``)."""
    v = [0.0] * dims
    v[i % dims] = 1.0
    return pack(v)


async def _add(store: Store, key: ChannelKey, text: str, *, role: Role = "user",
               sent_at: float = 1_700_000_000.0) -> Turn:
    turn = NewTurn(key, f"e{next(_ids)}", role, "alice", "Alice", text, 3, sent_at)
    return (await store.record(turn)).turn


class EmbeddingContract:
    """Mixed into ``StoreContract``; uses its ``store`` fixture."""

    async def test_is_an_embedding_store(self, store: Store) -> None:
        assert isinstance(store, EmbeddingStore)

    async def test_nearest_turns_rank_by_cosine_within_the_channel_and_model(
        self, store: Store
    ) -> None:
        turns = [await _add(store, A, f"turn {i}") for i in range(4)]
        other = await _add(store, B, "other channel")
        # turn 0 along axis 0; turn 1 between axes 0 and 1; turn 2 along axis 1
        vectors = [pack([1, 0, 0, 0]), pack([1, 1, 0, 0]), pack([0, 1, 0, 0]),
                   pack([1, 0, 0, 0])]
        assert await store.put_embeddings(A, M, list(zip(turns, vectors, strict=True))) == 4
        await store.put_embeddings(B, M, [(other, pack([1, 0, 0, 0]))])
        await store.put_embeddings(A, "another-model", [(turns[2], pack([1, 0, 0, 0]))])

        near = await store.nearest_turns(A, M, pack([1, 0.1, 0, 0]), before_seq=turns[3].seq,
                                         limit=2)
        assert [t.seq for t in near] == [turns[0].seq, turns[1].seq]
        everything = await store.nearest_turns(A, M, pack([0, 1, 0, 0]), before_seq=10**9,
                                               limit=10)
        assert [t.seq for t in everything][:2] == [turns[2].seq, turns[1].seq]
        assert {t.seq for t in everything} == {t.seq for t in turns}
        assert await store.embedding_count(A, M) == 4
        assert await store.embedding_count(A, "another-model") == 1
        assert await store.nearest_turns(A, "unknown-model", pack([1, 0, 0, 0]),
                                         before_seq=10**9, limit=5) == []

    async def test_vectors_of_another_dimension_are_skipped(self, store: Store) -> None:
        t1, t2 = await _add(store, A, "a"), await _add(store, A, "b")
        await store.put_embeddings(A, M, [(t1, pack([1, 0, 0])), (t2, pack([1, 0, 0, 0]))])
        near = await store.nearest_turns(A, M, pack([1, 0, 0, 0]), before_seq=10**9, limit=5)
        assert [t.seq for t in near] == [t2.seq]

    async def test_unembedded_turns_are_peoples_newest_first_within_the_span(
        self, store: Store
    ) -> None:
        turns = [await _add(store, A, f"t{i}") for i in range(6)]
        bot = await _add(store, A, "a reply", role="assistant")
        await store.put_embeddings(A, M, [(turns[4], _axis(0))])

        found, floor = await store.unembedded_turns(A, M, below=None, span=100, limit=10)
        assert [t.seq for t in found] == [turns[i].seq for i in (5, 3, 2, 1, 0)]
        assert bot.seq not in {t.seq for t in found}
        assert floor == bot.seq + 1 - 100
        some, _ = await store.unembedded_turns(A, M, below=None, span=100, limit=2)
        assert [t.seq for t in some] == [turns[5].seq, turns[3].seq]
        window, floor = await store.unembedded_turns(A, M, below=turns[3].seq, span=2, limit=10)
        assert [t.seq for t in window] == [turns[2].seq, turns[1].seq]
        assert floor == turns[3].seq - 2
        other_model, _ = await store.unembedded_turns(A, "m2", below=None, span=100, limit=10)
        assert len(other_model) == 6
        assert await store.unembedded_turns(ChannelKey("x", "y", "z"), M, below=None, span=10,
                                            limit=5) == ([], 0)

    async def test_a_vector_is_not_stored_for_a_changed_or_deleted_turn(
        self, store: Store
    ) -> None:
        kept, edited, deleted = [await _add(store, A, t) for t in ("kept", "old", "gone")]
        assert await store.edit(A, edited.message_id, "new text", 3) == "updated"
        assert await store.delete(A, deleted.message_id) == "deleted"
        stored = await store.put_embeddings(
            A, M, [(kept, _axis(0)), (edited, _axis(1)), (deleted, _axis(2))])
        assert stored == 1
        assert await store.embedding_count(A, M) == 1

    async def test_editing_deleting_and_resetting_drop_vectors(self, store: Store) -> None:
        turns = [await _add(store, A, f"t{i}") for i in range(4)]
        await store.put_embeddings(A, M, [(t, _axis(i)) for i, t in enumerate(turns)])
        b = await _add(store, B, "b")
        await store.put_embeddings(B, M, [(b, _axis(0))])

        assert await store.edit(A, turns[0].message_id, "t0", 3) == "updated"  # same text
        assert await store.embedding_count(A, M) == 4
        assert await store.edit(A, turns[1].message_id, "changed", 3) == "updated"
        assert await store.delete(A, turns[2].message_id) == "deleted"
        assert await store.embedding_count(A, M) == 2
        left, _ = await store.unembedded_turns(A, M, below=None, span=100, limit=10)
        assert [(t.seq, t.text) for t in left] == [(turns[1].seq, "changed")]
        near = await store.nearest_turns(A, M, _axis(2), before_seq=10**9, limit=10)
        assert turns[2].seq not in {t.seq for t in near}

        await store.reset(A)
        assert await store.embedding_count(A, M) == 0
        assert await store.embedding_count(B, M) == 1

    async def test_retention_drops_the_vectors_of_purged_turns(self, store: Store) -> None:
        old = await _add(store, A, "old", sent_at=100.0)
        new = await _add(store, A, "new", sent_at=2_000_000_000.0)
        await store.put_embeddings(A, M, [(old, _axis(0)), (new, _axis(1))])
        state = await store.state(A)
        assert await store.commit_summary(A, expected_version=state.version, text="S",
                                          folded_through=new.seq, facts=(), now=1.0)
        assert await store.purge_folded_before(1000.0) == 1
        assert await store.embedding_count(A, M) == 1
