"""``SqliteStore``: the store contract, plus what only SQLite has (WAL, schema versions,
opening bad files, lock contention, index use)."""

from __future__ import annotations

import asyncio
import logging
import random
import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from memory.errors import SchemaTooNewError, StoreBusyError, StoreOpenError
from memory.models import CarriedIdentifier, ChannelKey, NewLongTermFact, Turn
from memory.search_text import query_terms
from memory.store import Store
from memory.stores.sqlite import turn_search
from memory.stores.sqlite.schema import SCHEMA_VERSION
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.turn_search import register
from tests.harness.pre_split import sqlite_file
from tests.harness.store_contract import MakeStore, StoreContract, new_turn
from tests.harness.turn_index import assert_turn_index_matches_turns

KEY = ChannelKey("discord", "g1", "c1")


class TestSqliteStoreContract(StoreContract):
    """The shared contract on a fresh SQLite file per test."""

    @pytest.fixture
    async def make_store(self, tmp_path: Path) -> AsyncIterator[MakeStore]:
        opened: list[SqliteStore] = []

        async def make() -> Store:
            store = SqliteStore(tmp_path / "gistbot.db")
            await store.open()
            opened.append(store)
            return store

        yield make
        for store in opened:
            await store.close()


class TestInMemorySqliteStoreContract(StoreContract):
    """``sqlite:///:memory:`` (DATABASE_URL) must behave like a file, minus durability."""

    @pytest.fixture
    async def make_store(self) -> AsyncIterator[MakeStore]:
        opened: list[SqliteStore] = []

        async def make() -> Store:
            if opened:
                pytest.skip("an in-memory database does not outlive its store")
            store = SqliteStore(":memory:")
            await store.open()
            opened.append(store)
            return store

        yield make
        for store in opened:
            await store.close()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(tmp_path / "gistbot.db")
    await s.open()
    yield s
    await s.close()


# ---------------------------------------------------------------------------- file format


async def test_wal_mode_and_schema_version(store: SqliteStore) -> None:
    await store.record(new_turn(KEY))
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


async def test_reopening_does_not_migrate_again(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    for _ in range(3):
        async with SqliteStore(path) as s:
            await s.record(new_turn(KEY, "same"))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        assert conn.execute("SELECT count(*) FROM turns").fetchone() == (1,)


async def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION + 7,))
    store = SqliteStore(path)
    with pytest.raises(SchemaTooNewError) as info:
        await store.open()
    msg = str(info.value)
    assert f"schema version {SCHEMA_VERSION + 7}" in msg
    assert "upgrade gistbot" in msg and "DATABASE_URL" in msg
    assert isinstance(info.value, StoreOpenError)  # callers may catch the general class
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [
            (SCHEMA_VERSION + 7,)
        ]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "turns" not in tables
    await store.close()  # harmless after a failed open


async def test_corrupt_file_is_a_clear_open_error(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(random.Random(7).randbytes(64 * 1024))
    with pytest.raises(StoreOpenError, match="not a SQLite database or it is corrupt"):
        await SqliteStore(path).open()


async def test_corrupt_file_message_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"SQLite format 3\x00" + random.Random(8).randbytes(8192))
    with pytest.raises(StoreOpenError) as info:
        await SqliteStore(path).open()
    assert str(path) in str(info.value)


async def test_folder_under_a_regular_file_is_a_clear_open_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    with pytest.raises(StoreOpenError, match="DATABASE_URL"):
        await SqliteStore(blocker / "sub" / "db.sqlite").open()
    with pytest.raises(StoreOpenError, match="DATABASE_URL"):
        await SqliteStore(blocker / "db.sqlite").open()


async def test_directory_as_database_is_a_clear_open_error(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    with pytest.raises(StoreOpenError, match="not writable"):
        await SqliteStore(tmp_path / "adir").open()


async def test_missing_parent_folders_are_created(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "a" / "b" / "db.sqlite") as s:
        assert (await s.record(new_turn(KEY))).created


async def test_closed_store_raises_a_store_error(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "db.sqlite")
    await s.open()
    await s.close()
    from memory.errors import StoreError

    with pytest.raises(StoreError):
        await s.record(new_turn(KEY))
    with pytest.raises(StoreError):
        await s.state(KEY)


# ---------------------------------------------------------------------------- locking


async def test_locked_database_gives_busy_error_and_the_store_recovers(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = SqliteStore(path, busy_timeout=0.05)
    await store.open()
    try:
        await store.record(new_turn(KEY, "before"))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StoreBusyError):
                await store.record(new_turn(KEY, "during"))
            # readers are not blocked by a writer in WAL mode
            assert [t.message_id for t in await store.turns(KEY)] == ["before"]
        finally:
            other.execute("ROLLBACK")
            other.close()
        again = await store.record(new_turn(KEY, "during"))
        assert again.created  # the failed attempt left nothing behind
        assert [t.message_id for t in await store.turns(KEY)] == ["before", "during"]
    finally:
        await store.close()


async def test_a_failing_operation_does_not_poison_its_batch(store: SqliteStore) -> None:
    """One bad write (here: a role the schema rejects) fails alone; the batch commits,
    and the channel it created is not left behind half-made."""
    fresh = ChannelKey("discord", "g", "new-channel")
    bad = new_turn(fresh, "bad", role="system")  # type: ignore[arg-type]
    good = [new_turn(fresh, f"ok{i}") for i in range(5)]
    results = await asyncio.gather(
        store.record(bad), *(store.record(t) for t in good), return_exceptions=True
    )
    assert isinstance(results[0], Exception)
    assert all(not isinstance(r, BaseException) and r.created for r in results[1:])
    assert [t.message_id for t in await store.turns(fresh)] == [f"ok{i}" for i in range(5)]

    # the same failure alone, as the first write to a channel, must not break the channel
    alone = ChannelKey("discord", "g", "alone")
    with pytest.raises(Exception):  # noqa: B017 - any store error; what matters is after
        await store.record(new_turn(alone, "bad", role="system"))  # type: ignore[arg-type]
    assert (await store.record(new_turn(alone, "good"))).created
    assert [t.message_id for t in await store.turns(alone)] == ["good"]


# ---------------------------------------------------------------------------- query plans


async def _trace(store: SqliteStore, into: list[str]) -> None:
    """Capture every statement the store's connections run (with parameters inlined).

    sqlite3 objects belong to aiosqlite's worker threads, so the hook is set there."""
    for conn in {id(c): c for c in (store._w, store._r) if c is not None}.values():
        await conn._execute(conn._conn.set_trace_callback, into.append)


_HOT_TABLES = ("turns", "facts", "channels")


async def test_hot_queries_use_indexes(store: SqliteStore) -> None:
    for i in range(30):
        await store.record(new_turn(KEY, f"m{i}", sent_at=float(i)))
    await store.record(new_turn(ChannelKey("slack", "T", "C"), "x"))
    state = await store.state(KEY)
    logs: list[str] = []
    await _trace(store, logs)
    # the hot path: record (new and duplicate), a view, the compaction reads and commit
    await store.record(new_turn(KEY, "hot"))
    await store.record(new_turn(KEY, "hot"))
    await store.snapshot(KEY, limit=400)
    await store.snapshot(KEY, limit=400, through_seq=20)
    await store.pending_size(KEY)
    await store.pending(KEY, limit=1600)
    await store.commit_summary(KEY, expected_version=state.version, text="S", folded_through=10,
                               facts=[CarriedIdentifier("ORD-1", "c", 1, 2)], now=1.0)
    await store.edit(KEY, "m20", "edited", 1)
    await store.delete(KEY, "m21")
    await store.purge_folded_before(5.0)
    statements = [s for s in logs if re.match(r"\s*(SELECT|INSERT|UPDATE|DELETE)", s, re.I)]
    assert len(statements) >= 12

    with sqlite3.connect(store.path) as conn:
        register(conn)  # writes to turns run the search-index triggers, which call it
        for sql in statements:
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
            for step in plan:
                for table in _HOT_TABLES:
                    assert not re.match(rf"SCAN {table}\b", step), (sql, plan)
                if "turns" in sql:
                    assert "TEMP B-TREE" not in step, (sql, plan)
                    # a search on channel_id alone reads the channel's whole history
                    assert not re.search(r"(KEY|INDEX \w+) \(channel_id=\?\)", step), (sql, plan)


async def _steps(store: SqliteStore, action: Callable[[], object]) -> int:
    """SQLite VM instructions the reader connection executes for ``action`` (deterministic)."""
    assert store._r is not None
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0

    reader = store._r
    await reader._execute(reader._conn.set_progress_handler, tick, 1)
    try:
        await action()  # type: ignore[misc]
    finally:
        await reader._execute(reader._conn.set_progress_handler, None, 1)
    return count


async def test_view_and_pending_cost_does_not_grow_with_history(tmp_path: Path) -> None:
    """A channel with 10,000 archived turns costs the same to read as one with 100:
    counted in SQLite VM steps, not seconds, so the test is not timed."""
    async with SqliteStore(tmp_path / "db.sqlite", synchronous="OFF") as store:
        small, big = ChannelKey("d", "g", "small"), ChannelKey("d", "g", "big")
        for key, n in ((small, 100), (big, 10_000)):
            await asyncio.gather(*(store.record(new_turn(key, f"{i}")) for i in range(n)))
            state = await store.state(key)
            assert await store.commit_summary(key, expected_version=state.version, text="S",
                                              folded_through=n - 8, facts=(), now=1.0)
        costs = {}
        for key in (small, big):
            costs[key] = (
                await _steps(store, lambda k=key: store.snapshot(k, limit=400)),
                await _steps(store, lambda k=key: store.pending_size(k)),
                await _steps(store, lambda k=key: store.pending(k, limit=1600)),
            )
        for s, b in zip(costs[small], costs[big], strict=True):
            assert b <= s * 1.2 + 5, costs


# ---------------------------------------------------------------------------- turn search


def _old_file(conn: sqlite3.Connection, version: int, last: str, *, folded_through: int = 0,
              after_turn: Callable[[int], object] = lambda seq: None) -> None:
    """Schema ``version`` as gistbot left it, one channel with three turns (``last`` the
    third); ``after_turn(seq)`` runs after each insert (what that version did then)."""
    sqlite_file(conn, version)
    conn.execute("INSERT INTO channels (platform, workspace, channel, next_seq, "
                 "folded_through) VALUES ('discord', 'g1', 'c1', 4, ?)", (folded_through,))
    for seq, text in enumerate(["order ORD-7731 was charged twice", "프로젝트 마감은 금요일",
                                last], start=1):
        conn.execute("INSERT INTO turns VALUES (1, ?, ?, 'user', 'a', 'A', ?, 3, 5.0)",
                     (seq, f"m{seq}", text))
        after_turn(seq)


def _version_4_database(path: Path) -> None:
    """A file as gistbot with schema version 4 (before turn search) left it, with turns."""
    with sqlite3.connect(path, isolation_level=None) as conn:
        _old_file(conn, 4, "nothing special", folded_through=2)


async def test_a_version_4_database_migrates_and_its_old_turns_become_searchable(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v4.db"
    _version_4_database(path)
    async with SqliteStore(path) as s:
        [ord_turn] = await s.search_turns(KEY, query_terms("ORD-7731?"), before_seq=10)
        assert (ord_turn.seq, ord_turn.message_id) == (1, "m1")
        [korean] = await s.search_turns(KEY, query_terms("마감"), before_seq=10)
        assert korean.seq == 2
        new = await s.record(new_turn(KEY, "new", "charged again"))
        found = await s.search_turns(KEY, query_terms("charged"), before_seq=10)
        assert [t.seq for t in found] == [new.turn.seq, 1]
    with sqlite3.connect(path) as conn:
        register(conn)
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        assert assert_turn_index_matches_turns(conn) == 4


async def test_a_short_turn_outranks_a_long_one_with_the_same_match(store: SqliteStore) -> None:
    # turns_fts keeps no row sizes, so FTS5's bm25() scores both alike (the newer would come
    # first); the length re-ranking puts the shorter one first, as BM25 would
    filler = " ".join(f"word{i}" for i in range(60))
    for i in range(4):  # so that "kestrel" is in under half the turns (not a name's pass)
        await store.record(new_turn(KEY, f"o{i}", "something else"))
    texts = ["the kestrel landed", f"a kestrel and {filler}", f"o kestrel and {filler}"]
    seqs = [(await store.record(new_turn(KEY, f"k{i}", t))).turn.seq for i, t in enumerate(texts)]
    found = await store.search_turns(KEY, query_terms("kestrel"), before_seq=seqs[-1] + 1)
    assert [t.seq for t in found] == [seqs[0], seqs[2], seqs[1]]  # ties: newer first
    [only] = await store.search_turns(KEY, query_terms("kestrel"), before_seq=seqs[-1] + 1,
                                      limit=1)
    assert only.seq == seqs[0]


async def test_a_version_10_turn_index_is_rebuilt_without_row_sizes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "v10.db"
    with sqlite3.connect(path, isolation_level=None) as conn:
        register(conn)  # steps 5-10 as gistbot ran them, the turns indexed by its triggers

        def drain(seq: int) -> None:
            if seq < 3:  # the last one is left queued, as a crash before a drain would
                turn_search.drain(conn)

        _old_file(conn, 10, "still queued", after_turn=drain)
        assert conn.execute("SELECT count(*) FROM turns_fts_docsize").fetchone() == (2,)
    caplog.set_level(logging.INFO, logger="memory.stores.sqlite.schema")
    async with SqliteStore(path) as s:
        # the rebuild takes seconds per million turns: the log says why the start waits
        assert f"from schema version 10 to {SCHEMA_VERSION}" in caplog.text
        [korean] = await s.search_turns(KEY, query_terms("마감"), before_seq=10)
        [queued] = await s.search_turns(KEY, query_terms("queued"), before_seq=10)
        assert (korean.seq, queued.seq) == (2, 3)
        assert await s.delete(KEY, "m1") == "deleted"
        await s.record(new_turn(KEY, "m4", "charged again"))
        assert [t.message_id for t in await s.search_turns(
            KEY, query_terms("charged"), before_seq=10)] == ["m4"]
    with sqlite3.connect(path) as conn:
        register(conn)
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'turns_fts'").fetchone()
        assert "columnsize = 0" in sql
        assert conn.execute("SELECT count(*) FROM sqlite_master "
                            "WHERE name = 'turns_fts_docsize'").fetchone() == (0,)
        assert assert_turn_index_matches_turns(conn) == 3


async def test_a_version_14_turn_index_is_rebuilt_with_stems(tmp_path: Path) -> None:
    path = tmp_path / "v14.db"
    with sqlite3.connect(path, isolation_level=None) as conn:
        register(conn)
        _old_file(conn, 14, "we were cooking all night",
                  after_turn=lambda seq: turn_search.drain(conn))
        assert conn.execute("SELECT count(*) FROM turns_vocab WHERE term = 'cook'").fetchone() \
            == (0,)  # indexed as written before the step
    async with SqliteStore(path) as s:
        [cooked] = await s.search_turns(KEY, query_terms("who cooked?"), before_seq=10)
        [korean] = await s.search_turns(KEY, query_terms("마감"), before_seq=10)
        assert (cooked.seq, korean.seq) == (3, 2)
        await s.record(new_turn(KEY, "m4", "the charges were refunded"))
        assert [t.message_id for t in await s.search_turns(
            KEY, query_terms("charge refund"), before_seq=10)] == ["m4", "m1"]
    with sqlite3.connect(path) as conn:
        register(conn)
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        assert assert_turn_index_matches_turns(conn) == 4


async def test_a_version_11_archive_counts_its_writes_after_migrating(tmp_path: Path) -> None:
    path = tmp_path / "v11.db"
    with sqlite3.connect(path, isolation_level=None) as conn:
        register(conn)
        _old_file(conn, 11, "the egret invoice", after_turn=lambda seq: turn_search.drain(conn))
        conn.execute("INSERT INTO memory_facts (channel_id, text, source_seqs, author, pinned, "
                     "created_at) VALUES (1, 'the egret invoice is INV-5', '', '', 1, 1.0)")
        conn.execute("INSERT INTO memory_facts_fts (rowid, chan, terms) "
                     "VALUES (1, 'c1', 'the egret invoice is inv 5')")
    async with SqliteStore(path) as s:
        found = await s.search(KEY, query_terms("the egret invoice?"))
        assert [f.text for f in found.facts] == ["the egret invoice is INV-5"]
        looked_up = s.archive_vocab.looked_up
        await s.add_fact(KEY, NewLongTermFact("the egret invoice was paid"), now=2.0)
        found = await s.search(KEY, query_terms("the egret invoice?"))
        assert len(found.facts) == 2 and s.archive_vocab.looked_up > looked_up
    with sqlite3.connect(path) as conn:
        assert dict(conn.execute("SELECT name, n FROM archive_writes")) == {
            "episodes": 0, "memory_facts": 1}


async def test_turn_index_matches_the_turns_after_every_kind_of_write(
    store: SqliteStore, tmp_path: Path
) -> None:
    other = ChannelKey("slack", "T", "C")
    await asyncio.gather(*(store.record(new_turn(k, f"m{i}", f"word{i % 7} 회의 {i} ORD-{i}",
                                                 sent_at=float(i)))
                           for i in range(60) for k in (KEY, other)))
    await store.import_turns(ChannelKey("d", "g", "copied"), [
        Turn(ChannelKey("d", "g", "copied"), seq, f"c{seq}", "user", "a", "A",
             f"imported {seq} 締切日", 1, 1.0) for seq in range(1, 40)])
    for i in range(0, 60, 5):
        await store.edit(KEY, f"m{i}", f"edited word{i} lighthouse", 2)
    for i in range(1, 60, 6):
        await store.delete(other, f"m{i}")
    state = await store.state(KEY)
    await store.commit_summary(KEY, expected_version=state.version, text="S",
                               folded_through=40, facts=(), now=1.0)
    assert await store.purge_folded_before(20.0) > 0
    await store.reset(other)
    with sqlite3.connect(store.path) as conn:
        register(conn)
        assert assert_turn_index_matches_turns(conn) == 40 + 39
    lighthouse = await store.search_turns(KEY, query_terms("lighthouse"), before_seq=10**6)
    assert sorted(t.message_id for t in lighthouse) == sorted(
        f"m{i}" for i in range(20, 60, 5))


async def test_turn_search_reads_one_rowid_range_and_turns_by_key(store: SqliteStore) -> None:
    for i in range(30):
        await store.record(new_turn(KEY, f"m{i}", f"alpha {i}"))
    logs: list[str] = []
    await _trace(store, logs)
    await store.search_turns(KEY, ["alpha", "7"], before_seq=20)
    await store.turns_at(KEY, [3, 4, 5])
    statements = [s for s in logs if re.match(r"\s*SELECT", s, re.I)]
    with sqlite3.connect(store.path) as conn:
        plans = {sql: " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
                 for sql in statements}
    fts = [p for sql, p in plans.items() if "turns_fts MATCH" in sql]
    assert fts and all("VIRTUAL TABLE INDEX" in p for p in fts), plans
    for sql, plan in plans.items():
        if "FROM turns " in sql:
            assert "USING PRIMARY KEY (channel_id=? AND seq=?)" in plan, (sql, plan)


async def test_a_version_15_database_gains_turn_vectors_that_deletes_drop(
    tmp_path: Path,
) -> None:
    from memory.embedding_store import pack

    path = tmp_path / "v15.db"
    with sqlite3.connect(path, isolation_level=None) as conn:
        register(conn)
        _old_file(conn, 15, "we flew to Rio", after_turn=lambda seq: turn_search.drain(conn))
    async with SqliteStore(path) as s:
        turns = await s.turns(KEY)
        vectors = [(t, pack([1.0, float(t.seq)])) for t in turns]
        assert await s.put_embeddings(KEY, "m", vectors) == 3
        assert await s.delete(KEY, "m3") == "deleted"
        assert await s.embedding_count(KEY, "m") == 2
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        assert conn.execute("SELECT seq FROM turn_embeddings ORDER BY seq").fetchall() == [
            (1,), (2,)]
