"""Part of the ``Store`` contract: text that arrives for a turn later (its files read,
``MemoryStore.amend``) belongs to that turn whether compaction folded it first or not.

A folded turn gets the text, the turn search finds it at once, and it waits in the queue
(``amended``) until a commit that folds it in takes it off; a stale commit takes nothing
off. Mixed into ``StoreContract``; nothing here knows the backend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from memory.models import ChannelKey, NewTurn, Turn
from memory.search_text import query_terms
from memory.store import Store

__all__ = ["AmendContract"]

A = ChannelKey("discord", "g1", "c1")
B = ChannelKey("discord", "g1", "c2")
NOTES = "standup notes [attachment: notes.txt]"
READ = "standup notes\n[attachment: notes.txt]\nthe vault code is zebracorn-77\n" \
       "[end of attachment: notes.txt]"


async def _fill(store: Store, key: ChannelKey, n: int) -> list[Turn]:
    """``n`` turns of ``key``; the second names a file (``NOTES``) not read yet."""
    out = []
    for i in range(n):
        text = NOTES if i == 1 else f"turn {i}"
        out.append((await store.record(NewTurn(key, f"{key.channel}-{i}", "user", "alice",
                                               "Alice", text, 5, 1_700_000_000.0 + i))).turn)
    return out


async def _commit(store: Store, key: ChannelKey, through: int, *, version: int | None = None,
                  amended: tuple[int, ...] = ()) -> bool:
    state = await store.state(key)
    return await store.commit_summary(
        key, expected_version=state.version if version is None else version, text="S",
        folded_through=through, facts=(), now=1.0, amended=amended)


async def _hits(store: Store, key: ChannelKey, text: str) -> list[str]:
    found = await store.search_turns(key, query_terms(text), before_seq=10_000)
    return [t.message_id for t in found]


class AmendContract:
    """Late text of folded and unfolded turns, on every backend."""

    async def test_late_text_of_a_folded_turn_is_stored_searchable_and_queued(
        self, store: Store
    ) -> None:
        turns = await _fill(store, A, 6)
        await _fill(store, B, 3)
        assert await _commit(store, A, turns[2].seq)
        before = (await store.state(A)).version

        assert await store.amend(A, "c1-1", READ, 40) == "amended"
        (stored,) = await store.turns_at(A, [turns[1].seq])
        assert (stored.text, stored.tokens, stored.message_id) == (READ, 40, "c1-1")
        assert await _hits(store, A, "zebracorn") == ["c1-1"]
        assert await store.amended(A) == [stored]
        assert (await store.state(A)).version > before  # a fold that read the old text fails
        assert await store.amended(B) == []

        # an unfolded turn is simply edited; it is folded with its new text later
        assert await store.amend(A, "c1-4", "turn 4, read", 9) == "updated"
        assert [t.message_id for t in await store.amended(A)] == ["c1-1"]
        assert await store.amend(A, "nope", "x", 1) == "missing"
        assert await store.amend(ChannelKey("discord", "no", "no"), "c1-1", "x", 1) == "missing"

    async def test_only_a_commit_that_folded_it_in_takes_a_late_turn_off_the_queue(
        self, store: Store
    ) -> None:
        turns = await _fill(store, A, 8)
        assert await _commit(store, A, turns[2].seq)
        stale = (await store.state(A)).version
        assert await store.amend(A, "c1-1", READ, 40) == "amended"
        # a compaction that read the state before the text arrived cannot commit
        assert not await _commit(store, A, turns[4].seq, version=stale,
                                 amended=(turns[1].seq,))
        assert [t.seq for t in await store.amended(A)] == [turns[1].seq]
        # one that folds other turns only leaves it queued
        assert await _commit(store, A, turns[4].seq)
        assert [t.seq for t in await store.amended(A)] == [turns[1].seq]
        assert await _commit(store, A, turns[6].seq, amended=(turns[1].seq,))
        assert await store.amended(A) == []
        assert await _hits(store, A, "zebracorn") == ["c1-1"]  # the text stays with its turn

    async def test_the_queue_survives_a_restart_and_goes_with_reset_and_retention(
        self, store: Store, make_store: Callable[[], Awaitable[Store]]
    ) -> None:
        turns = await _fill(store, A, 4)
        assert await _commit(store, A, turns[2].seq)
        assert await store.amend(A, "c1-1", READ, 40) == "amended"
        await store.close()
        store = await make_store()
        assert [t.text for t in await store.amended(A)] == [READ]
        await store.purge_folded_before(2_000_000_000.0)  # every folded turn is old enough
        assert await store.amended(A) == []
        assert await store.amend(A, "c1-1", READ, 40) == "missing"

        more = await _fill(store, B, 4)
        assert await _commit(store, B, more[2].seq)
        assert await store.amend(B, "c2-1", READ, 40) == "amended"
        await store.reset(B)
        assert await store.amended(B) == [] and await _hits(store, B, "zebracorn") == []
