"""Storage faults no retry fixes (issue 14): classified from the database's own errors and
reported once a minute per cause, with the count meanwhile, and once when writes work
again."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from memory.errors import StoreError, StoreUnavailableError
from memory.models import ChannelKey
from memory.stores.faults import FaultReport
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.writer import translate, unavailable_cause
from tests.harness.store_contract import new_turn

KEY = ChannelKey("slack", "T", "C1")


def real_error(db: Path, pragma: str, sql: str) -> sqlite3.Error:
    """The error SQLite itself raises for ``sql`` after ``pragma``."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS t (x TEXT)")
        conn.commit()
        conn.execute(pragma)
        conn.execute(sql)
        conn.commit()
    except sqlite3.Error as e:
        return e
    finally:
        conn.close()
    raise AssertionError("no error")


def test_sqlite_errors_are_classified_by_result_code(tmp_path: Path) -> None:
    ro = real_error(tmp_path / "a.db", "PRAGMA query_only = 1", "INSERT INTO t VALUES ('x')")
    assert unavailable_cause(ro) == "read-only"
    pages = sqlite3.connect(tmp_path / "b.db")
    pages.execute("CREATE TABLE t (x TEXT)")
    count = pages.execute("PRAGMA page_count").fetchone()[0]
    pages.close()
    full = real_error(tmp_path / "b.db", f"PRAGMA max_page_count = {count}",
                      "INSERT INTO t VALUES (zeroblob(100000))")  # fmt: skip
    assert unavailable_cause(full) == "disk full"
    syntax = real_error(tmp_path / "c.db", "PRAGMA foreign_keys = 1", "SELEC 1")
    assert unavailable_cause(syntax) is None
    assert not isinstance(translate(syntax), StoreUnavailableError)
    assert isinstance(translate(syntax), StoreError)


def test_reported_once_a_minute_per_cause(caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    report = FaultReport(clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="memory.stores")
    for _ in range(50):
        report.failed(StoreUnavailableError("disk full", "database or disk is full"))
        report.failed(StoreUnavailableError("read-only", "attempt to write a readonly db"))
        now[0] += 0.5  # 25 s in all
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "(disk full)" in lines[0] and "(read-only)" in lines[1]
    now[0] += 40  # a minute after the first
    report.failed(StoreUnavailableError("disk full", "database or disk is full"))
    assert "49 more writes failed" in caplog.records[-1].getMessage()
    report.succeeded()
    assert "accepts writes again" in caplog.records[-1].getMessage()
    assert len(caplog.records) == 4
    report.succeeded()
    assert len(caplog.records) == 4  # said once


async def test_a_full_store_raises_unavailable_and_recovers(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "s.db") as store:
        await store.record(new_turn(KEY, "m0"))
        conn = store._w
        assert conn is not None
        pages = (await (await conn.execute("PRAGMA page_count")).fetchone())[0]  # type: ignore[index]
        await conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreUnavailableError) as raised:
            for i in range(200):
                await store.record(new_turn(KEY, f"m{i + 1}", "x" * 4000))
        assert raised.value.cause == "disk full"
        await conn.execute("PRAGMA max_page_count = 1073741823")
        assert (await store.record(new_turn(KEY, "after"))).created
