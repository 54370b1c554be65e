"""The usage role's reservations (``UsageStore.reserve_tokens`` and ``settle_tokens``),
mixed into ``RolesContract`` so every backend runs it: concurrent reservations, from one
store or two on the same database, never hold more than a limit; a person's and a server's
are held together or not at all; settling releases what a call did not use; an expired
reservation is reclaimed; a retried reservation holds once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from bot.stores import Storage
from bot.stores.usage import Refusal, UsageKey

DAY = "2026-01-01"
ALICE, BOB, SERVER = UsageKey("discord", "g1", "alice"), UsageKey("discord", "g1", "bob"), \
    UsageKey("discord", "g1")
NOW = 1_000_000.0
TTL = 900.0


async def reserve(storage: Storage, limits: dict[UsageKey, int], tokens: int, *,
                  now: float = NOW, rid: str | None = None) -> tuple[str, Refusal | None]:
    """One reservation of ``tokens`` under ``limits``; its id and refusal (None: held)."""
    rid = rid or uuid.uuid4().hex
    refusal = await storage.usage.reserve_tokens(DAY, limits, tokens, rid=rid, now=now,
                                                 expires_at=now + TTL)
    return rid, refusal


class ReservationContract:
    """Tests of the usage role's reservations; ``storage`` and ``make_storage`` are the
    backend's fixtures."""

    async def test_concurrent_reservations_never_hold_more_than_the_limit(
        self, storage: Storage, make_storage: Callable[[], Awaitable[Storage]]
    ) -> None:
        other = await make_storage()  # a second replica on the same database
        limits = {ALICE: 5000, SERVER: 3000}
        results = await asyncio.gather(*(
            reserve(s, limits, 400) for s in (storage, other) for _ in range(15)))
        refusals = [r for _, r in results if r is not None]
        assert len(results) - len(refusals) == 7  # 7 × 400 ≤ 3000 < 8 × 400
        assert {r.account for r in refusals} == {SERVER}
        assert not any(r.full for r in refusals)  # nothing is spent yet: they may wait
        for rid, refusal in results:  # each used 100 of its 400
            if refusal is None:
                await storage.usage.settle_tokens(rid, DAY, [ALICE, SERVER], 100, kind="reply")
        assert await storage.usage.tokens_used(DAY, [ALICE, SERVER]) == {ALICE: 700,
                                                                         SERVER: 700}
        assert await storage.usage.tokens_by_kind(DAY, [SERVER]) == {SERVER: {"reply": 700}}
        held = [r for _, r in await asyncio.gather(*(
            reserve(s, limits, 400) for s in (other, storage) for _ in range(10)))]
        assert held.count(None) == 5  # 700 + 5 × 400 ≤ 3000 < 700 + 6 × 400

    async def test_settling_releases_what_the_call_did_not_use(self, storage: Storage) -> None:
        limits = {SERVER: 1000}
        rid, refusal = await reserve(storage, limits, 800)
        assert refusal is None
        _, refusal = await reserve(storage, limits, 800)
        assert refusal == Refusal(SERVER, full=False)  # held by the first: wait
        await storage.usage.settle_tokens(rid, DAY, [SERVER], 150)
        assert await storage.usage.tokens_used(DAY, [SERVER]) == {SERVER: 150}
        rid2, refusal = await reserve(storage, limits, 800)
        assert refusal is None  # 150 used + 800 ≤ 1000
        await storage.usage.settle_tokens(rid2, DAY, [SERVER], 100)
        _, refusal = await reserve(storage, limits, 800)
        assert refusal == Refusal(SERVER, full=True)  # 250 used: it can never fit today

    async def test_a_call_that_failed_settles_to_zero(self, storage: Storage) -> None:
        limits = {ALICE: 1000}
        rid, _ = await reserve(storage, limits, 1000)
        await storage.usage.settle_tokens(rid, DAY, [ALICE], 0)
        assert await storage.usage.tokens_used(DAY, [ALICE]) == {ALICE: 0}
        _, refusal = await reserve(storage, limits, 1000)
        assert refusal is None  # the whole limit is free again

    async def test_the_person_and_the_server_are_reserved_together_or_not_at_all(
        self, storage: Storage
    ) -> None:
        await storage.usage.add_tokens(DAY, [SERVER], 900)
        _, refusal = await reserve(storage, {ALICE: 1000, SERVER: 1000}, 200)
        assert refusal == Refusal(SERVER, full=True)
        _, refusal = await reserve(storage, {ALICE: 1000}, 1000)
        assert refusal is None  # the refused call held nothing of alice's
        _, refusal = await reserve(storage, {BOB: 100}, 101)
        assert refusal == Refusal(BOB, full=True)  # larger than the limit itself

    async def test_an_expired_reservation_is_reclaimed_by_the_next(
        self, storage: Storage
    ) -> None:
        limits = {SERVER: 1000}
        left_behind, _ = await reserve(storage, limits, 900)  # its process was killed
        _, refusal = await reserve(storage, limits, 900, now=NOW + TTL - 1)
        assert refusal == Refusal(SERVER, full=False)
        rid, refusal = await reserve(storage, limits, 900, now=NOW + TTL)
        assert refusal is None
        await storage.usage.settle_tokens(left_behind, DAY, [SERVER], 50)  # late after all
        await storage.usage.settle_tokens(rid, DAY, [SERVER], 50)
        assert await storage.usage.tokens_used(DAY, [SERVER]) == {SERVER: 100}
        _, refusal = await reserve(storage, limits, 900, now=NOW + TTL)
        assert refusal is None  # the late settle gave back nothing it no longer held

    async def test_a_retried_reservation_holds_once(self, storage: Storage) -> None:
        limits = {SERVER: 1000}
        rid, _ = await reserve(storage, limits, 600)
        _, refusal = await reserve(storage, limits, 600, rid=rid)
        assert refusal is None  # the same reservation, committed before
        await storage.usage.settle_tokens(rid, DAY, [SERVER], 0)
        _, refusal = await reserve(storage, limits, 1000)
        assert refusal is None
