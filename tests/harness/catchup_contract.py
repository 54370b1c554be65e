"""The catch-up part of the store contract (``memory.catchup_store``: turns by time, a
person's last message), mixed into ``StoreContract`` so both backends run it."""

from __future__ import annotations

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
    """Turns by time and the last message by an author."""

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
