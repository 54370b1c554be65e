"""``bot.conversation.outbox.Outbox`` on a real SQLite file with a scripted outlet: the first
attempt posts, a retry whose post was recorded posts nothing, a retry whose post was not recorded
looks for it first, a placeholder is edited instead of posting beside it, and a store
that fails does not stop the answer; a reply's first intent recorded ahead, its debt
settled once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.conversation.outbox import Outbox, Post, reply_id
from bot.errors import OutcomeUnknown
from bot.missed.owed import OwedReplies
from bot.stores import Storage
from bot.stores.outbox import OutboxStore
from bot.stores.owed import ReplyDue, ReplyLedger
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore

KEY = ChannelKey("slack", "T1", "C1")


class Outlet:
    """Records what it was asked; ``posted`` is what the platform holds."""

    def __init__(self) -> None:
        self.posted: dict[str, str] = {}  # platform id -> outbox id
        self.asked: list[str] = []

    async def post(self, post: Post) -> str | None:
        self.asked.append("post")
        mid = str(len(self.posted) + 1)
        self.posted[mid] = post.outbox_id
        return mid

    async def edit(self, post: Post, message_id: str) -> bool:
        self.asked.append("edit")
        self.posted[message_id] = post.outbox_id
        return True

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        return self.posted.pop(message_id, None) is not None

    async def find(self, post: Post) -> str | None:
        self.asked.append("find")
        return next((m for m, o in self.posted.items() if o == post.outbox_id), None)


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[Storage]:
    async with Storage.on(SqliteStore(tmp_path / "bot.db")) as s:
        yield s


@pytest.fixture
def store(storage: Storage) -> OutboxStore:
    return storage.outbox


def post(part: int = 0) -> Post:
    return Post(KEY, reply_id(KEY, "m1", part), f"part {part}", "1700.1")


async def test_a_recorded_post_is_never_posted_again(store: OutboxStore) -> None:
    outlet, outbox = Outlet(), Outbox(store)
    assert await outbox.send(outlet, post()) == "1"
    assert await outbox.send(outlet, post()) == "1"
    assert outlet.asked == ["post"]  # the retry asked the platform nothing


async def test_a_post_whose_record_was_lost_is_found_not_posted(store: OutboxStore) -> None:
    outlet = Outlet()
    assert await store.outbox_intent(KEY, post().outbox_id) is None  # the dead attempt
    outlet.posted["7"] = post().outbox_id  # ...whose post the platform accepted
    assert await Outbox(store).send(outlet, post()) == "7"
    assert outlet.asked == ["find"] and list(outlet.posted) == ["7"]
    assert await store.outbox_intent(KEY, post().outbox_id) == "7"  # recorded now


async def test_a_lost_record_whose_post_cannot_be_looked_up_posts_nothing_now(
    store: OutboxStore,
) -> None:
    """The platform cannot be read: the post may stand, so the retry posts nothing now
    (the reply stays owed; the next attempt looks again)."""
    outlet = Outlet()
    assert await store.outbox_intent(KEY, post().outbox_id) is None  # the dead attempt
    outlet.posted["7"] = post().outbox_id

    async def unreadable(p: Post) -> str | None:
        outlet.asked.append("find")
        raise OutcomeUnknown("HTTP 500")

    outlet.find = unreadable  # type: ignore[method-assign]
    assert await Outbox(store).send(outlet, post()) is None
    assert outlet.asked == ["find"] and list(outlet.posted) == ["7"]
    outlet.find = Outlet.find.__get__(outlet)  # type: ignore[method-assign]
    assert await Outbox(store).send(outlet, post()) == "7"  # readable again: found


async def test_a_late_answer_goes_into_its_placeholder(store: OutboxStore) -> None:
    outlet = Outlet()
    outlet.posted["5"] = "placeholder"
    assert await Outbox(store).send_all(outlet, [post(0), post(1)], into="5")
    assert outlet.asked == ["edit", "post"]
    assert outlet.posted == {"5": post(0).outbox_id, "2": post(1).outbox_id}


async def test_a_failing_store_does_not_stop_the_answer(storage: Storage) -> None:
    await storage.close()  # every write fails now
    outlet = Outlet()
    assert await Outbox(storage.outbox).send(outlet, post()) == "1"
    assert outlet.asked == ["post"]
    await storage.open()


async def test_a_reply_stops_at_a_part_not_delivered_and_goes_on_from_it_next_time(
    store: OutboxStore,
) -> None:
    outlet = Outlet()
    posting = outlet.post

    async def refuse_part_1(p: Post) -> str | None:
        return None if p.outbox_id == post(1).outbox_id else await posting(p)

    outlet.post = refuse_part_1  # type: ignore[method-assign]
    parts = [post(0), post(1), post(2)]
    assert not await Outbox(store).send_all(outlet, parts)
    assert list(outlet.posted.values()) == [post(0).outbox_id]  # part 2 did not pass the gap
    outlet.post = posting  # type: ignore[method-assign]
    assert await Outbox(store).send_all(outlet, parts)
    assert list(outlet.posted.values()) == [p.outbox_id for p in parts]


async def test_an_answer_its_placeholder_refuses_is_posted_and_the_placeholder_deleted(
    store: OutboxStore,
) -> None:
    outlet = Outlet()
    outlet.posted["5"] = "placeholder"

    async def refuse(p: Post, message_id: str) -> bool:
        outlet.asked.append("edit")
        return False

    outlet.edit = refuse  # type: ignore[method-assign]
    assert await Outbox(store).send(outlet, post(0), into="5") == "2"
    assert outlet.asked == ["edit", "post"]
    assert outlet.posted == {"2": post(0).outbox_id}  # "thinking…" is gone


# ------------------------------------------------ a reply's intent ahead, its debt settled once


class Ledger:
    """A ``ReplyLedger`` over the real one that counts the settles asked of it."""

    def __init__(self, real: ReplyLedger) -> None:
        self.real, self.settles = real, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def settle_owed(self, key: ChannelKey, message_id: str) -> bool:
        self.settles += 1
        return await self.real.settle_owed(key, message_id)


async def owed_mention(storage: Storage, owed: OwedReplies) -> None:
    """Message m1 recorded with the reply it is owed, which ``owed`` is answering."""
    assert isinstance(storage.memory, SqliteStore)
    await storage.memory.record(NewTurn(KEY, "m1", "user", "U1", "Ann", "question?", 2, 1.0,
                                        ReplyDue(owed.owner, 30.0)))
    owed.answering(KEY, "m1")


async def test_a_debt_settled_with_the_last_post_is_not_settled_again(storage: Storage) -> None:
    ledger = Ledger(storage.owed)
    owed = OwedReplies(ledger)
    await owed_mention(storage, owed)
    sent = await Outbox(storage.outbox).send_all(Outlet(), [post(0), post(1)], settle="m1")
    assert sent and sent.settled
    await owed.finished(KEY, "m1", delivered=True, recorded=sent.settled)
    assert ledger.settles == 0  # one write settled it: the last post's record
    assert await storage.owed.claim_owed(KEY, "m1", "other", 30.0) is None  # nothing owed


async def test_a_debt_the_posts_record_could_not_settle_is_settled_by_the_ledger(
    storage: Storage,
) -> None:
    ledger = Ledger(storage.owed)
    owed = OwedReplies(ledger)
    await owed_mention(storage, owed)
    sent = await Outbox(None).send_all(Outlet(), [post(0)], settle="m1")  # no outbox rows
    assert sent and not sent.settled
    await owed.finished(KEY, "m1", delivered=True, recorded=sent.settled)
    assert ledger.settles == 1
    assert await storage.owed.claim_owed(KEY, "m1", "other", 30.0) is None


async def test_an_intent_recorded_ahead_posts_once_and_a_retry_after_a_crash_looks_first(
    store: OutboxStore,
) -> None:
    """The first message's intent is recorded while the answer is made: that attempt posts
    without looking; an attempt that died after recording it (the post may stand) makes
    the next one look before posting, never post blind."""
    outlet, outbox = Outlet(), Outbox(store)
    ahead = await outbox.intend(post(0))
    assert ahead.earlier is None
    assert await outbox.send_all(outlet, [post(0)], intent=ahead)
    assert outlet.asked == ["post"]
    assert (await outbox.intend(post(0))).earlier == "1"  # recorded: a retry posts nothing

    other = Post(KEY, reply_id(KEY, "m2", 0), "part 0", "1700.2")
    assert (await outbox.intend(other)).earlier is None  # ... and then the process died
    outlet.asked.clear()
    retry = await outbox.intend(other)
    assert retry.earlier == ""
    assert await outbox.send_all(outlet, [other], intent=retry)
    assert outlet.asked == ["find", "post"]  # looked first; not found, posted once
