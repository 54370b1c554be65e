"""The digests role's contract (``bot.stores.digests``): schedules and exactly-once slot
claims, mixed into ``RolesContract`` so both backends run it."""

from __future__ import annotations

import asyncio

from bot.stores import Storage
from bot.stores.digests import DigestSchedule
from memory.models import ChannelKey

__all__ = ["DigestContract"]

K = ChannelKey("discord", "g9", "c9")
OTHER = ChannelKey("discord", "g9", "c10")
T0 = 1_700_000_000.0


class DigestContract:
    """Schedules round-trip; a slot is claimed once; an unfinished claim expires."""

    async def test_schedules_round_trip_replace_and_delete(self, storage: Storage) -> None:
        s = DigestSchedule(K, "daily", -1, 9 * 60, "Europe/Berlin", T0, "u1")
        await storage.digests.set_digest_schedule(s)
        assert await storage.digests.digest_schedule(K) == s
        weekly = DigestSchedule(K, "weekly", 0, 8 * 60 + 30, "UTC", T0 + 1, "u2", True)
        await storage.digests.set_digest_schedule(weekly)
        assert await storage.digests.digest_schedules() == [weekly]
        assert await storage.digests.delete_digest_schedule(K)
        assert not await storage.digests.delete_digest_schedule(K)
        assert await storage.digests.digest_schedule(K) is None

    async def test_a_slot_is_claimed_once_even_by_racing_claimers(self, storage: Storage) -> None:
        wins = await asyncio.gather(
            *(storage.digests.claim_digest_slot(K, T0, f"owner{i}", 600) for i in range(8))
        )
        assert sum(wins) == 1
        digests = storage.digests
        assert await digests.claim_digest_slot(K, T0 + 86400, "owner1", 600)  # the next slot
        assert await storage.digests.claim_digest_slot(OTHER, T0, "owner1", 600)  # another channel

    async def test_an_unfinished_claim_expires_a_finished_one_never(self, storage: Storage) -> None:
        assert await storage.digests.claim_digest_slot(K, T0, "dead", 0.2)
        assert not await storage.digests.claim_digest_slot(K, T0, "late", 600)
        await asyncio.sleep(0.4)
        digests = storage.digests
        assert await digests.claim_digest_slot(K, T0, "late", 0.2)  # the dead holder's expired
        assert not await digests.finish_digest_slot(K, T0, "dead", "posted")  # no longer its
        assert await storage.digests.finish_digest_slot(K, T0, "late", "posted")
        await asyncio.sleep(0.4)
        assert not await storage.digests.claim_digest_slot(K, T0, "third", 600)  # posted is final
        [slot] = await storage.digests.digest_slots(K)
        assert (slot.owner, slot.state, slot.slot_at) == ("late", "posted", T0)
