"""The owed-replies role's contract (``bot.stores.owed``: replies owed to addressed
messages, the placeholder a late answer replaces) and the outbox (``bot.stores.outbox``)
that settles a debt with the post that delivers it, mixed into ``RolesContract`` so both
backends run it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from bot.stores import Storage
from bot.stores.owed import ReplyDue
from memory.models import ChannelKey, NewTurn

__all__ = ["OwedContract"]

MakeStorage = Callable[[], Awaitable[Storage]]
K = ChannelKey("slack", "T1", "C1")
D = ChannelKey("discord", "g1", "c1")


def new_turn(key: ChannelKey, message_id: str, *, sent_at: float) -> NewTurn:
    """A user turn addressed to the bot (the caller adds the ``extra`` it owes)."""
    return NewTurn(key, message_id, "user", "alice", "Alice", "@gistbot hello?", 3, sent_at)


class OwedContract:
    """Debts are written with their turn, claimed once, renewed, released, settled, expired."""

    async def test_a_debt_is_recorded_with_its_turn_only_when_created(
        self, make_storage: MakeStorage
    ) -> None:
        s = await make_storage()
        now = time.time()
        due = ReplyDue("", 30, route="1700.1")
        first = await s.memory.record(replace(new_turn(K, "m1", sent_at=now), extra=due))
        again = await s.memory.record(replace(new_turn(K, "m1", sent_at=now), extra=due))
        assert first.created and not again.created
        [owed] = await s.owed.claim_due("slack", "p1", 30, since=now - 60)
        assert (owed.key, owed.message_id, owed.seq, owed.route, owed.attempts) == (
            K, "m1", first.turn.seq, "1700.1", 1)
        assert await s.owed.claim_due("slack", "p2", 30, since=now - 60) == []  # p1 holds it
        await s.memory.record(new_turn(K, "m2", sent_at=now))  # no due: nothing owed
        assert await s.owed.claim_owed(K, "m2", "p1", 30) is None

    async def test_a_claim_has_one_winner_across_stores(self, make_storage: MakeStorage) -> None:
        stores = [await make_storage() for _ in range(2)]
        now = time.time()
        for i in range(5):
            await stores[0].memory.record(replace(new_turn(K, f"m{i}", sent_at=now + i),
                                           extra=ReplyDue("", 30)))
        sweeps = [s.owed.claim_due("slack", f"p{n}", 30, since=now - 60, limit=3)
                  for n, s in enumerate(stores * 3)]
        won = [o.message_id for batch in await asyncio.gather(*sweeps) for o in batch]
        assert sorted(won) == [f"m{i}" for i in range(5)]
        one = [s.owed.claim_owed(K, "m0", f"q{n}", 30) for n, s in enumerate(stores * 3)]
        assert [r for r in await asyncio.gather(*one) if r is not None] == []  # all held

    async def test_owner_claims_its_own_live_claim_others_wait_for_it(
        self, make_storage: MakeStorage
    ) -> None:
        s = await make_storage()
        now = time.time()
        await s.memory.record(replace(new_turn(K, "m1", sent_at=now), extra=ReplyDue("p1", 30)))
        assert await s.owed.claim_owed(K, "m1", "p2", 30) is None
        mine = await s.owed.claim_owed(K, "m1", "p1", 30)
        assert mine is not None and mine.attempts == 1
        assert await s.owed.release_owed(K, "m1", "p1")
        assert not await s.owed.release_owed(K, "m1", "p2")  # not p2's to release
        taken = await s.owed.claim_owed(K, "m1", "p2", 30)
        assert taken is not None and taken.attempts == 2
        assert await s.owed.settle_owed(K, "m1")
        assert not await s.owed.settle_owed(K, "m1")
        assert await s.owed.claim_owed(K, "m1", "p1", 30) is None

    async def test_claims_run_out_unless_renewed(self, make_storage: MakeStorage) -> None:
        s = await make_storage()
        now = time.time()
        for mid in ("m1", "m2"):
            await s.memory.record(replace(new_turn(D, mid, sent_at=now), extra=ReplyDue("p1", 0.4)))
        assert await s.owed.renew_owed("p1", [(D, "m1")], 30) == 1
        assert await s.owed.renew_owed("p2", [(D, "m2")], 30) == 0  # not p2's
        await asyncio.sleep(0.6)  # p1 "died": m2's claim ran out, m1's was renewed
        assert await s.owed.renew_owed("p1", [(D, "m2")], 30) == 0  # too late to renew
        got = await s.owed.claim_due("discord", "p2", 30, since=now - 60)
        assert [o.message_id for o in got] == ["m2"]
        assert await s.owed.claim_due("slack", "p2", 30, since=now - 60) == []  # per platform

    async def test_old_or_exhausted_debts_expire_and_are_returned(
        self, make_storage: MakeStorage
    ) -> None:
        s = await make_storage()
        now = time.time()
        await s.memory.record(replace(new_turn(K, "old", sent_at=now - 900),
                                      extra=ReplyDue("", 30)))
        await s.memory.record(replace(new_turn(K, "new", sent_at=now), extra=ReplyDue("", 30)))
        await s.memory.record(replace(new_turn(K, "held", sent_at=now - 900),
                                      extra=ReplyDue("p", 30)))
        assert await s.owed.claim_due("slack", "p", 30, since=now - 300) != []  # "new" only
        gone = await s.owed.expire_owed("slack", before=now - 300, max_attempts=3)
        assert [o.message_id for o in gone] == ["old"]  # "held" is claimed: not yet
        assert await s.owed.release_owed(K, "new", "p")
        assert await s.owed.expire_owed("slack", before=now - 300, max_attempts=1) != []

    async def test_a_placeholder_is_remembered_by_the_debts_owner_only(
        self, make_storage: MakeStorage
    ) -> None:
        s = await make_storage()
        now = time.time()
        await s.memory.record(replace(new_turn(K, "m1", sent_at=now), extra=ReplyDue("p1", 0.2)))
        assert not await s.owed.owed_placeholder(K, "m1", "p2", "1700.9")  # not p2's debt
        assert await s.owed.owed_placeholder(K, "m1", "p1", "1700.9")
        assert not await s.owed.owed_placeholder(K, "m2", "p1", "1700.9")  # nothing owed
        await asyncio.sleep(0.3)  # p1 "died" while answering
        [owed] = await s.owed.claim_due("slack", "p2", 30, since=now - 60)
        assert owed.placeholder == "1700.9"  # the late answer goes there

    async def test_the_last_post_of_a_reply_settles_its_debt_in_one_write(
        self, make_storage: MakeStorage
    ) -> None:
        s = await make_storage()
        now = time.time()
        await s.memory.record(replace(new_turn(K, "m1", sent_at=now), extra=ReplyDue("p1", 30)))
        assert await s.outbox.outbox_intent(K, "reply:m1#0") is None  # the first attempt
        assert await s.outbox.outbox_intent(K, "reply:m1#0") == ""  # intended, maybe posted
        await s.outbox.outbox_posted(K, "reply:m1#0", "1700.5", settle="m1")
        assert await s.outbox.outbox_intent(K, "reply:m1#0") == "1700.5"  # posted: never again
        assert not await s.owed.settle_owed(K, "m1")  # settled with the post
        await s.outbox.outbox_posted(D, "digest:1#0", "42")  # recorded without an intent
        assert await s.outbox.outbox_intent(D, "digest:1#0") == "42"
