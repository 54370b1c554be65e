"""``gistbot copy-db``: SQLite → PostgreSQL → SQLite loses nothing and is identical in content;
a non-empty target is refused without --force/--resume; an interrupted copy resumes."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.cli import main
from bot.ops.dbtools import CopyError, channel_checksum, copy_db
from bot.stores import Storage
from memory.models import CarriedIdentifier, ChannelKey, NewEpisode, NewLongTermFact
from memory.search_text import query_terms
from memory.stores.sqlite.store import SqliteStore
from tests.harness.store_contract import new_turn

asyncpg = pytest.importorskip("asyncpg")
PG = os.environ.get("GISTBOT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
KEYS = [
    ChannelKey("discord", "g1", "c1"),
    ChannelKey("slack", "T1", "C1"),
    ChannelKey("console", "local", "일반"),
]


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    schema = f"gistbot_copy_{uuid.uuid4().hex[:10]}"
    yield f"{PG}#{schema}"
    conn = await asyncpg.connect(PG)
    await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    await conn.close()


def pg_store(url: str):  # type: ignore[no-untyped-def]
    from memory.stores.postgres.store import PostgresStore

    dsn, _, schema = url.partition("#")
    return Storage.on(PostgresStore(dsn, schema=schema, max_size=2))


def sqlite(path: Path) -> Storage:
    """Storage on a SQLite file (``copy-db`` copies settings and digests too)."""
    return Storage.on(SqliteStore(path))


async def seed(path: Path) -> None:
    async with SqliteStore(path) as store:
        for k, key in enumerate(KEYS):
            for i in range(1500 if k == 0 else 40):  # more than one copy page
                text = f"메시지 {i} · order ORD-{i} 🎉" if k == 2 else f"message {i}\nline two"
                await store.record(new_turn(key, f"m{i}", text, sent_at=1000.25 + i))
            state = await store.state(key)
            await store.commit_summary(
                key,
                expected_version=state.version,
                text=f"## Topics\n- summary of {key.channel}",
                folded_through=20,
                now=1234.5,
                facts=[CarriedIdentifier("ORD-7", "Alice: ORD-7 is late", 3, 9)],
                episode=NewEpisode(1, 20, 1001.25, 1020.25, ("Alice", "민수"), "they planned"),
                channel_facts=[NewLongTermFact("the deadline is Friday", (4,), "Alice")],
            )
            old = (await store.list_facts(key))[0]
            later = NewLongTermFact(
                "the deadline moved to Monday", (25,), "민수", supersedes=old.id
            )
            await store.add_fact(key, later, now=1300.0)
            pin = NewLongTermFact("pinned: use `gistctl`", (), "Bob", pinned=True)
            await store.add_fact(key, pin, now=1400.0)
            edited = (await store.state(key)).version  # an operator's edit: history version 2
            assert await store.edit_summary(key, expected_version=edited, text="edited",
                                            now=1500.0, author="10.0.0.1")
            await store.delete(key, "m30")  # a gap in the seqs


async def checksums(storage: Storage) -> dict[ChannelKey, tuple[int, str]]:
    return {k: await channel_checksum(storage.memory, k) for k in KEYS}


async def test_round_trip_sqlite_postgres_sqlite_is_identical(tmp_path: Path, pg_url: str) -> None:
    await seed(tmp_path / "a.db")
    async with (
        sqlite(tmp_path / "a.db") as a,
        pg_store(pg_url) as pg,
        sqlite(tmp_path / "b.db") as b,
    ):
        first = await copy_db(a, pg)
        assert first.copied_turns == 1499 + 39 + 39 and first.channels == 3
        await copy_db(pg, b)
        original = await checksums(a)
        assert await checksums(pg) == original
        assert await checksums(b) == original
        for key in KEYS:  # and the same row by row, not just the same hash
            assert await b.memory.turns(key, limit=5000) == await a.memory.turns(key, limit=5000)
            assert await b.memory.state(key) == await a.memory.state(key)
            facts = await b.memory.list_facts(key)
            assert [f.text for f in facts] == [f.text for f in await a.memory.list_facts(key)]
            friday = next(f for f in facts if "Friday" in f.text)
            monday = next(f for f in facts if "Monday" in f.text)
            assert friday.superseded_by == monday.id  # the link points at the copy
            (episode,) = await b.memory.episodes(key)
            assert episode.speakers == ("Alice", "민수") and episode.text == "they planned"
            history = [(v.version, v.text, v.first_seq, v.last_seq, v.source, v.author)
                       for v in await b.memory.summary_history_of(key)]
            assert history == [(v.version, v.text, v.first_seq, v.last_seq, v.source, v.author)
                               for v in await a.memory.summary_history_of(key)]
            assert [h[4] for h in history] == ["edit", "compaction"]
        # every copied turn is indexed for search: SQLite, its copy in PostgreSQL and the
        # copy back find the same turns (in the same order on SQLite; PostgreSQL's ts_rank
        # does not weigh turn length, SQLite's BM25 does, so equal matches may swap)
        for key, question in ((KEYS[0], "message 1234, or 77?"), (KEYS[1], "message 17"),
                              (KEYS[2], "메시지 주문 ORD-33"), (KEYS[0], "line two")):
            terms = query_terms(question)
            found = [await s.memory.search_turns(key, terms, before_seq=10**6, limit=12)
                     for s in (a, pg, b)]
            assert found[0] and found[0] == found[2], (key, question)
            assert sorted(t.seq for t in found[1]) == sorted(t.seq for t in found[0])
            if key == KEYS[0] and "77" in question:
                assert {t.text.split()[1] for t in found[0][:2]} == {"1234", "77"}
        hits = await b.memory.search(KEYS[0], ["deadline"])  # the copies are searchable too
        assert hits.facts and hits.facts[0].text == "the deadline moved to Monday"
        # the copy is a live store: new turns continue after the copied seqs
        nxt = await b.memory.record(new_turn(KEYS[0], "new", "after the copy"))
        assert nxt.created and nxt.turn.seq == 1501


async def test_non_empty_target_is_refused_without_flags(tmp_path: Path) -> None:
    await seed(tmp_path / "a.db")
    async with sqlite(tmp_path / "a.db") as a, sqlite(tmp_path / "b.db") as b:
        await b.memory.record(new_turn(KEYS[1], "other", "something else"))
        with pytest.raises(CopyError, match="--resume"):
            await copy_db(a, b)
        with pytest.raises(CopyError, match="verification failed"):
            await copy_db(a, b, resume=True)  # the conflicting turn is not overwritten
        await copy_db(a, b, force=True)
        assert await checksums(b) == await checksums(a)


async def test_interrupted_copy_resumes(tmp_path: Path) -> None:
    await seed(tmp_path / "a.db")
    async with sqlite(tmp_path / "a.db") as a, sqlite(tmp_path / "b.db") as b:
        page = await a.memory.turns(KEYS[0], limit=700)
        await b.memory.import_turns(KEYS[0], page)  # a copy killed mid-channel
        lines: list[str] = []
        report = await copy_db(a, b, resume=True, progress=lines.append)
        assert report.copied_turns == 1499 + 39 + 39 - 700
        assert await checksums(b) == await checksums(a)
        again = await copy_db(a, b, resume=True)
        assert again.skipped_channels == 3 and again.copied_turns == 0


def test_cli_copy_db_and_migrate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(seed(tmp_path / "a.db"))
    env = tmp_path / "x.env"
    env.write_text("LOG_LEVEL=WARNING\n")
    assert main(["--env-file", str(env), "migrate", "--url", f"sqlite:///{tmp_path}/m.db"]) == 0
    assert "schema is up to date" in capsys.readouterr().out
    copy = [
        "--env-file",
        str(env),
        "copy-db",
        "--from",
        f"sqlite:///{tmp_path}/a.db",
        "--to",
        f"sqlite:///{tmp_path}/c.db",
    ]
    code = main(copy)
    assert code == 0
    assert "checksums verified" in capsys.readouterr().out
    code = main(copy)  # the same copy again: the target is no longer empty
    assert code == 1
    assert "--resume" in capsys.readouterr().err
