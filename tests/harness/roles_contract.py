"""The contract of the storage roles that are not memory (``bot.stores``): settings and
usage (and its reservations), digests, owed replies and the outbox, backfill marks.

Use it by subclassing ``RolesContract`` and overriding ``make_storage``: an async factory
that opens a new ``Storage`` on the *same* backing database each time it is called, from
an empty database for each test, closing what it opened at teardown. Only the role
protocols (and ``Storage.memory`` for what a role writes with a turn) are used.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from adapters.backfill import HistoryStore
from bot.stores import Storage
from memory.models import ChannelKey, NewTurn
from tests.harness.digest_contract import DigestContract
from tests.harness.owed_contract import OwedContract
from tests.harness.reservation_contract import ReservationContract
from tests.harness.settings_contract import SettingsContract

__all__ = ["MakeStorage", "RolesContract"]

MakeStorage = Callable[[], Awaitable[Storage]]

A = ChannelKey("discord", "g1", "c1")
B = ChannelKey("discord", "g1", "c2")


class BackfillContract:
    """A backfill mark keeps the oldest start until it is ended; ``/reset`` drops it."""

    async def test_backfill_marks_keep_the_oldest_start_until_it_is_ended(
        self, storage: Storage
    ) -> None:
        marks = storage.history()
        assert isinstance(marks, HistoryStore)  # what the adapters' backfill takes
        await storage.memory.record(NewTurn(A, "u0", "user", "alice", "Alice", "hi", 1, 1.0))
        assert await marks.backfill_mark(A) is None
        assert await marks.begin_backfill(A, "100") == "100"
        assert await marks.begin_backfill(A, "250") == "100"  # a later start resumes from it
        assert await marks.begin_backfill(B, "7") == "7"  # per channel
        await marks.end_backfill(A, "250")  # not the mark in effect: kept
        assert await marks.backfill_mark(A) == "100"
        await marks.end_backfill(A, "100")
        assert await marks.backfill_mark(A) is None
        assert await marks.backfill_mark(B) == "7"
        assert await marks.begin_backfill(A, "250") == "250"
        await storage.memory.reset(A)  # forgotten: no later backfill re-reads from before
        assert await marks.backfill_mark(A) is None
        assert await marks.backfill_mark(B) == "7"
        assert await marks.channels() == [A]
        assert await marks.newest_message_ids(A) == []  # reset: no turns left


class RolesContract(SettingsContract, ReservationContract, DigestContract, OwedContract,
                    BackfillContract):
    """Every role of ``Storage`` but memory; subclasses override ``make_storage``."""

    @pytest.fixture
    async def make_storage(self) -> AsyncIterator[MakeStorage]:
        raise NotImplementedError("a backend's test module must override make_storage")
        yield  # pragma: no cover

    @pytest.fixture
    async def storage(self, make_storage: MakeStorage) -> Storage:
        return await make_storage()
