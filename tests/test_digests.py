"""Scheduled digests: slot arithmetic in time zones and across DST, the ``/digest``
grammar, and exactly one post per slot across processes (SQLite file and PostgreSQL) and
restarts — a slot missed while down is posted late once, never twice, and older missed
slots are not posted at all."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.arguments import ArgumentError
from bot.catchup.digests import latest_slot, parse_digest, previous_slot
from bot.stores.digests import DigestSchedule
from memory.models import ChannelKey, NewTurn
from tests.compaction_child import open_storage
from tests.harness.children import ended
from tests.harness.deadlines import scaled
from tests.harness.postgres import fresh_schema

ROOT = Path(__file__).resolve().parent.parent
KEY = ChannelKey("discord", "g1", "c1")
NY = ZoneInfo("America/New_York")


def at(*args: int, zone: ZoneInfo = NY) -> float:
    return datetime(*args, tzinfo=zone).timestamp()  # type: ignore[misc]


DAILY = DigestSchedule(KEY, "daily", -1, 9 * 60, "America/New_York", at(2026, 3, 1))
WEEKLY = DigestSchedule(KEY, "weekly", 0, 9 * 60, "America/New_York", at(2026, 3, 1))


def test_daily_slot_stays_at_local_nine_across_dst() -> None:
    assert latest_slot(DAILY, at(2026, 3, 9, 10)) == at(2026, 3, 9, 9)
    assert latest_slot(DAILY, at(2026, 3, 9, 8, 59)) == at(2026, 3, 8, 9)
    # 9:00 EDT on Monday, 9:00 EST on Saturday: 23 hours apart across the change
    assert at(2026, 3, 9, 9) - previous_slot(DAILY, at(2026, 3, 9, 9)) == 24 * 3600
    assert at(2026, 3, 8, 9) - previous_slot(DAILY, at(2026, 3, 8, 9)) == 23 * 3600
    assert latest_slot(DAILY, at(2026, 3, 9, 10)) == at(2026, 3, 9, 13, zone=ZoneInfo("UTC"))


def test_weekly_slot_is_the_last_monday() -> None:
    assert latest_slot(WEEKLY, at(2026, 3, 12, 12)) == at(2026, 3, 9, 9)
    assert latest_slot(WEEKLY, at(2026, 3, 9, 8)) == at(2026, 3, 2, 9)
    assert previous_slot(WEEKLY, at(2026, 3, 9, 9)) == at(2026, 3, 2, 9)


def test_digest_grammar() -> None:
    s = parse_digest("weekly Mon 08:30 Asia/Seoul", KEY, default_zone="UTC", now=5.0, by="u")
    assert s == DigestSchedule(KEY, "weekly", 0, 510, "Asia/Seoul", 5.0, "u")
    d = parse_digest("daily 9:05", KEY, default_zone="Europe/Berlin", now=5.0)
    assert isinstance(d, DigestSchedule) and (d.minute, d.tz) == (545, "Europe/Berlin")
    t = parse_digest("daily 07:00 thread", KEY, default_zone="Asia/Seoul", now=1.0)
    assert isinstance(t, DigestSchedule) and (t.in_thread, t.tz) == (True, "Asia/Seoul")
    assert [parse_digest(w, KEY, default_zone="UTC", now=0) for w in ("", "off", "now")] == [
        "status", "off", "now"]
    for bad in ("hourly 09:00", "daily 9am", "weekly funday 09:00", "daily 24:00",
                "daily 09:00 Mars/Base", "weekly 09:00"):
        with pytest.raises(ArgumentError):  # a since or a zone that is none
            parse_digest(bad, KEY, default_zone="UTC", now=0)


# ---------------------------------------------------------------- exactly once, processes


@pytest.fixture(params=["sqlite", "postgres"])
async def spec(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "shared.db")
        return
    async with fresh_schema("gistbot_dg") as url:
        yield url


SLOT = at(2026, 3, 9, 9)


async def seed(spec: str) -> None:
    storage = open_storage(spec)
    await storage.open()
    store = storage.memory
    try:
        for i in range(6):
            await store.record(NewTurn(KEY, f"m{i}", "user", f"u{i % 2}", f"P{i % 2}",
                                       f"update {i}: ticket TK-{100 + i} is done", 5,
                                       SLOT - 3600 * (i + 1)))
        await storage.digests.set_digest_schedule(DAILY)
    finally:
        await storage.close()


async def run_children(spec: str, tmp_path: Path, clock: float, n: int,
                       ticks: int = 3) -> list[str]:
    posts, go = tmp_path / "posts.txt", tmp_path / f"go-{uuid.uuid4().hex}"
    procs: list[asyncio.subprocess.Process] = []
    try:
        for _ in range(n):
            procs.append(await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tests.digest_child", spec, str(posts), str(clock),
                str(go), str(ticks), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE))
        go.touch()
        for proc in procs:
            out, err = await asyncio.wait_for(proc.communicate(), scaled(60))
            assert proc.returncode == 0, err.decode()
            assert out.decode().strip() == "done"
    finally:
        await ended(*procs)
    return posts.read_text().splitlines() if posts.exists() else []


@pytest.mark.slow
async def test_two_processes_post_a_slot_exactly_once(spec: str, tmp_path: Path) -> None:
    await seed(spec)
    posts = await run_children(spec, tmp_path, SLOT + 5, n=2)
    assert len(posts) == 1, posts
    assert "Daily digest" in posts[0] and "6 messages" in posts[0]


@pytest.mark.slow
async def test_a_restart_across_the_slot_posts_it_once_late(spec: str, tmp_path: Path) -> None:
    await seed(spec)
    assert await run_children(spec, tmp_path, SLOT - 60, n=1) == []  # before the slot
    # down at 09:00; back at 11:00: the slot is posted late, once
    assert len(await run_children(spec, tmp_path, SLOT + 7200, n=1)) == 1
    # restarted again the same day: nothing more
    assert len(await run_children(spec, tmp_path, SLOT + 7300, n=1)) == 1
    # people talk every day; the bot is down for three days: only the latest slot is
    # posted, not the three it missed
    storage = open_storage(spec)
    await storage.open()
    store = storage.memory
    try:
        for day in range(3):
            await store.record(NewTurn(KEY, f"d{day}", "user", "u1", "P1",
                                       f"day {day}: ticket TK-{200 + day}", 5,
                                       SLOT + 86400 * day + 3600))
    finally:
        await storage.close()
    posts = await run_children(spec, tmp_path, SLOT + 3 * 86400 + 60, n=2)
    assert len(posts) == 2  # the first one plus exactly one more
    assert "Wed 11 Mar 09:00 – Thu 12 Mar 09:00" in posts[1] and "1 message" in posts[1]
    storage = open_storage(spec)
    await storage.open()
    try:
        slots = await storage.digests.digest_slots(KEY)
    finally:
        await storage.close()
    assert [(s.slot_at, s.state) for s in slots] == [  # 10 and 11 March never claimed
        (at(2026, 3, 12, 9), "posted"), (SLOT, "posted"),
        (at(2026, 3, 8, 9), "skipped")]  # the first run's slot: nothing said in its period


@pytest.mark.slow
async def test_a_claim_whose_holder_died_is_posted_late(spec: str, tmp_path: Path) -> None:
    await seed(spec)
    storage = open_storage(spec)
    await storage.open()
    try:
        assert await storage.digests.claim_digest_slot(KEY, SLOT, "died-before-posting", 0.3)
    finally:
        await storage.close()
    await asyncio.sleep(0.5)  # (that a live claim is not taken over: the store contract)
    assert len(await run_children(spec, tmp_path, SLOT + 600, n=2)) == 1


async def test_copy_db_carries_schedules_and_claims(tmp_path: Path) -> None:
    from bot.ops.dbtools import copy_db
    await seed(str(tmp_path / "a.db"))
    async with open_storage(str(tmp_path / "a.db")) as a, \
            open_storage(str(tmp_path / "b.db")) as b:
        assert await a.digests.claim_digest_slot(KEY, SLOT, "p1", 600)
        assert await a.digests.finish_digest_slot(KEY, SLOT, "p1", "posted")
        await copy_db(a, b)
        assert await b.digests.digest_schedules() == [DAILY]
        slots = await b.digests.digest_slots(KEY)
        assert [(s.slot_at, s.state) for s in slots] == [(SLOT, "posted")]
        assert not await b.digests.claim_digest_slot(KEY, SLOT, "p2", 600)  # not posted twice
        await copy_db(a, b, resume=True)  # idempotent
        assert len(await b.digests.digest_slots(KEY)) == 1
