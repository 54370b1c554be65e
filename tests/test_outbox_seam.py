"""``bot.conversation.outbox.Outbox`` on a real SQLite file with a scripted outlet: the first
attempt posts, a retry whose post was recorded posts nothing, a retry whose post was not recorded
looks for it first, a placeholder is edited instead of posting beside it, and a store
that fails does not stop the answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.conversation.outbox import Outbox, Post, reply_id
from bot.errors import OutcomeUnknown
from bot.stores import Storage
from bot.stores.outbox import OutboxStore
from memory.models import ChannelKey
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
