"""The catch-up and digest part of the store contract (``memory.catchup_store``), mixed
into ``StoreContract`` so both backends run it.

Kept in its own module so the store contract's other tests stay as they are.
"""

from __future__ import annotations

import asyncio

from memory.catchup_store import DigestSchedule
from memory.models import ChannelKey, NewTurn
from memory.store import Store

__all__ = ["CatchupContract"]

K = ChannelKey("discord", "g9", "c9")
OTHER = ChannelKey("discord", "g9", "c10")
T0 = 1_700_000_000.0


def _turn(key: ChannelKey, i: int, sent_at: float, author: str = "alice",
          role: str = "user") -> NewTurn:
    return NewTurn(key, f"{key.channel}-{i}", role, author, author.title(),  # type: ignore[arg-type]
                   f"message {i}", 3, sent_at)


class CatchupContract:
    """Turns by time, last message by author, schedules, slot claims."""

    async def test_turns_between_is_half_open_ordered_by_time_and_per_channel(
        self, store: Store
    ) -> None:
        # recorded out of time order (a backfill): the answer is in time order
        for i, at in enumerate([T0 + 30, T0 + 10, T0 + 20, T0 + 40, T0]):
            await store.record(_turn(K, i, at))
        await store.record(_turn(OTHER, 99, T0 + 15))
        got = await store.turns_between(K, T0 + 10, T0 + 40)
        assert [t.sent_at for t in got] == [T0 + 10, T0 + 20, T0 + 30]
        assert all(t.key == K for t in got)
        assert [t.message_id for t in await store.turns_between(K, T0, T0 + 50, limit=2)] == [
            "c9-4", "c9-1"]
        assert await store.turns_between(ChannelKey("x", "y", "z"), 0, T0 * 2) == []

    async def test_last_turn_by_author_before_a_time(self, store: Store) -> None:
        await store.record(_turn(K, 1, T0, "alice"))
        await store.record(_turn(K, 2, T0 + 5, "bob"))
        await store.record(_turn(K, 3, T0 + 9, "alice"))
        await store.record(_turn(K, 4, T0 + 12, "alice", role="assistant"))
        last = await store.last_turn_by(K, "alice", T0 + 100)
        assert last is not None and last.message_id == "c9-3"
        before = await store.last_turn_by(K, "alice", T0 + 9)
        assert before is not None and before.message_id == "c9-1"
        assert await store.last_turn_by(K, "carol", T0 + 100) is None
        assert await store.last_turn_by(OTHER, "alice", T0 + 100) is None

    async def test_schedules_round_trip_replace_and_delete(self, store: Store) -> None:
        s = DigestSchedule(K, "daily", -1, 9 * 60, "Europe/Berlin", T0, "u1")
        await store.set_digest_schedule(s)
        assert await store.digest_schedule(K) == s
        weekly = DigestSchedule(K, "weekly", 0, 8 * 60 + 30, "UTC", T0 + 1, "u2", True)
        await store.set_digest_schedule(weekly)
        assert await store.digest_schedules() == [weekly]
        assert await store.delete_digest_schedule(K)
        assert not await store.delete_digest_schedule(K)
        assert await store.digest_schedule(K) is None

    async def test_a_slot_is_claimed_once_even_by_racing_claimers(self, store: Store) -> None:
        wins = await asyncio.gather(
            *(store.claim_digest_slot(K, T0, f"owner{i}", 600) for i in range(8))
        )
        assert sum(wins) == 1
        assert await store.claim_digest_slot(K, T0 + 86400, "owner1", 600)  # the next slot
        assert await store.claim_digest_slot(OTHER, T0, "owner1", 600)  # another channel

    async def test_an_unfinished_claim_expires_a_finished_one_never(self, store: Store) -> None:
        assert await store.claim_digest_slot(K, T0, "dead", 0.2)
        assert not await store.claim_digest_slot(K, T0, "late", 600)
        await asyncio.sleep(0.4)
        assert await store.claim_digest_slot(K, T0, "late", 0.2)  # the dead holder's expired
        assert not await store.finish_digest_slot(K, T0, "dead", "posted")  # no longer its
        assert await store.finish_digest_slot(K, T0, "late", "posted")
        await asyncio.sleep(0.4)
        assert not await store.claim_digest_slot(K, T0, "third", 600)  # posted is final
        [slot] = await store.digest_slots(K)
        assert (slot.owner, slot.state, slot.slot_at) == ("late", "posted", T0)
