"""Every time a catch-up or digest prints is in the zone it was asked for: the heading, the
plain citations (console; a Slack message whose permalink failed) and the span, across the
night Europe/Berlin moves from CET (UTC+1) to CEST (UTC+2), on a real SQLite store."""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.catchup.command import Catchups, Where
from bot.catchup.digests import DigestScheduler
from bot.catchup.gather import Catchup
from bot.stores import Storage
from bot.stores.digests import DigestSchedule
from memory.models import ChannelKey
from memory.store import Store
from memory.stores.sqlite.store import SqliteStore
from memory.tokens import TokenCounter
from tests.fakes.models import ScriptedModel
from tests.harness.catchup import citing_answer, fill

BERLIN = ZoneInfo("Europe/Berlin")
UTC = ZoneInfo("UTC")
KEY = ChannelKey("console", "local", "ops")
# Sunday 29 March 2026: at 01:00 UTC Berlin's clocks jump from 02:00 CET to 03:00 CEST.
SAT_2330_CET = datetime(2026, 3, 28, 22, 30, tzinfo=UTC).timestamp()  # 23:30 in Berlin
SUN_1100_CEST = datetime(2026, 3, 29, 9, 0, tzinfo=UTC).timestamp()  # 11:00 in Berlin
NOW = datetime(2026, 3, 29, 10, 0, tzinfo=UTC).timestamp()  # 12:00 in Berlin
CITE = re.compile(r"\[(\d+): (\w+) (\d\d:\d\d)\]")


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[Storage]:
    async with Storage.on(SqliteStore(tmp_path / "z.db")) as storage:
        s = storage.memory
        await fill(s, KEY, [("Alice", "late deploy v2.4.0 tagged")], start=SAT_2330_CET)
        await fill(s, KEY, [("Bob", "rollback RB-7 not needed")], start=SUN_1100_CEST,
                   prefix="n")
        yield storage


@pytest.fixture
def store(storage: Storage) -> Store:
    return storage.memory


def catchups(store: Store, tok: TokenCounter) -> Catchups:
    llm = ScriptedModel(functools.partial(citing_answer, per_call=4), purposes={"digest"})
    llm.is_offline = False  # type: ignore[attr-defined]
    llm.name = "scripted"  # type: ignore[attr-defined]
    engine = Catchup(store, llm, tok)  # type: ignore[arg-type]
    return Catchups(engine, store, UTC, clock=lambda: NOW)


def cited_times(text: str) -> dict[str, str]:
    return {name: hhmm for _n, name, hhmm in CITE.findall(text)}


@pytest.mark.parametrize(("words", "label"), [
    ("yesterday Europe/Berlin", "since yesterday: Sat 28 Mar 00:00 – Sun 29 Mar 12:00"),
    ("since 11pm yesterday Europe/Berlin", "since 11pm yesterday: Sat 28 Mar 23:00 – "),
])
async def test_catchup_citations_and_heading_are_in_the_zone_asked_for(
    store: Store, tok: TokenCounter, words: str, label: str
) -> None:
    result = await catchups(store, tok).command(Where(KEY), "carol", words)
    head = result.text.splitlines()[0]
    assert label in head and "(Europe/Berlin)" in head and "2 messages" in head, head
    # UTC would print 22:30 and 09:00; Berlin is +1 before the change and +2 after it
    assert cited_times(result.text) == {"Alice": "23:30", "Bob": "11:00"}, result.text


async def test_the_same_catchup_in_utc_prints_utc(store: Store, tok: TokenCounter) -> None:
    result = await catchups(store, tok).command(Where(KEY), "carol", "2026-03-28")
    assert "(UTC)" in result.text.splitlines()[0]
    assert cited_times(result.text) == {"Alice": "22:30", "Bob": "09:00"}


class Posts:
    """An outlet that keeps what the scheduler posts (console channels have no platform)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def where(self, key: ChannelKey) -> Where:
        return Where(key)

    async def post(self, key: ChannelKey, text: str, *, slot_at: float,
                   in_thread: bool = False) -> None:
        self.texts.append(text)


async def test_a_digest_prints_its_schedule_zone(storage: Storage, tok: TokenCounter) -> None:
    # daily at 12:00 Berlin: the slot covers Saturday 12:00 CET to Sunday 12:00 CEST (23 h)
    store = storage.memory
    await storage.digests.set_digest_schedule(DigestSchedule(
        KEY, "daily", -1, 12 * 60, "Europe/Berlin", NOW - 3 * 86400, "carol"))
    scheduler = DigestScheduler(storage.digests, catchups(store, tok), clock=lambda: NOW + 60)
    posts = Posts()
    scheduler.add_outlet("console", posts)
    assert await scheduler.tick() == 1
    [text] = posts.texts
    head = text.splitlines()[0]
    assert "Sat 28 Mar 12:00 – Sun 29 Mar 12:00 (Europe/Berlin)" in head, head
    assert cited_times(text) == {"Alice": "23:30", "Bob": "11:00"}, text
