"""The visibility rule on plain data (``bot.catchup.visibility.visible``): who may read which of a
channel's threads, for one person and for a public post."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.catchup.visibility import Audience, visible
from memory.models import ChannelKey

CHANNEL = ChannelKey("discord", "g", "general")
OPEN = ChannelKey("discord", "g", "open-thread")
CLOSED = ChannelKey("discord", "g", "private-thread")
OTHER = ChannelKey("discord", "g", "private-2")


@dataclass
class Person:
    """What a platform would say about one person."""

    readable: set[ChannelKey] = field(default_factory=lambda: {CHANNEL, OPEN, CLOSED, OTHER})
    member_of: set[ChannelKey] = field(default_factory=set)
    asked: list[ChannelKey] = field(default_factory=list)

    async def can_read(self, key: ChannelKey) -> bool:
        return key in self.readable

    async def is_member(self, key: ChannelKey) -> bool:
        self.asked.append(key)
        return key in self.member_of


async def shown(audience: Audience) -> set[ChannelKey]:
    return set(await visible(audience, CHANNEL, [OPEN, CLOSED, OTHER], {CLOSED, OTHER}))


async def test_a_person_sees_the_private_threads_they_are_a_member_of() -> None:
    member = Person(member_of={CLOSED})
    assert await shown(Audience(member)) == {CHANNEL, OPEN, CLOSED}
    assert sorted(member.asked, key=str) == [OTHER, CLOSED]
    assert await shown(Audience(Person())) == {CHANNEL, OPEN}


async def test_a_public_post_never_includes_a_private_thread_whoever_asks() -> None:
    member = Person(member_of={CLOSED, OTHER})
    assert await shown(Audience(member, public=True)) == {CHANNEL, OPEN}
    assert member.asked == []  # not even asked
    assert await shown(Audience(public=True)) == {CHANNEL, OPEN}


async def test_without_a_reader_membership_is_unknown_so_private_threads_stay_out() -> None:
    assert await shown(Audience()) == {CHANNEL, OPEN}


async def test_what_the_person_cannot_read_is_left_out_channel_included() -> None:
    assert await shown(Audience(Person(readable={CHANNEL}, member_of={CLOSED}))) == {CHANNEL}
    assert await shown(Audience(Person(readable={OPEN}))) == {OPEN}  # callers then refuse


async def test_the_channel_itself_is_never_held_back_as_private() -> None:
    keys = await visible(Audience(public=True), CLOSED, [], {CLOSED})
    assert keys == {CLOSED}  # a post in a private thread is read by its members only


async def test_a_public_post_includes_only_what_everyone_who_sees_it_may_read() -> None:
    asker = Person(member_of={CLOSED})
    everyone = Person(readable={CHANNEL})  # a thread's history some viewers may not read
    assert await shown(Audience(asker, public=True, everyone=everyone)) == {CHANNEL}
    assert await shown(Audience(asker, everyone=everyone)) == {CHANNEL, OPEN, CLOSED}
    nobody = Person(readable=set())
    assert await shown(Audience(asker, public=True, everyone=nobody)) == set()
