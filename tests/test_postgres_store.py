"""``PostgresStore``: the store contract on PostgreSQL, plus what several processes need
(leases, cross-process seqs, lost connections, migrations, index use).

Each test gets its own schema, dropped afterwards, on 127.0.0.1:5432 database ``test``
(``GISTBOT_TEST_POSTGRES_URL`` overrides); skipped only when nothing listens there."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from memory.errors import AnsweredTurnGone, SchemaTooNewError, StoreError, StoreOpenError
from memory.models import ChannelKey, TurnRef
from tests.harness.postgres import PG, reachable
from tests.harness.store_contract import MakeStore, StoreContract, new_turn

asyncpg = pytest.importorskip("asyncpg", reason="the postgres extra (asyncpg) is not installed")

from memory.stores.postgres.schema import MIGRATIONS, SCHEMA_VERSION  # noqa: E402
from memory.stores.postgres.store import PostgresStore  # noqa: E402

DSN = PG
ROOT = Path(__file__).resolve().parent.parent
KEY = ChannelKey("discord", "g1", "c1")


pytestmark = pytest.mark.skipif(
    not reachable(DSN), reason=f"no PostgreSQL listening for {urlsplit(DSN).netloc}"
)


@pytest.fixture
async def admin() -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(DSN)
    yield conn
    await conn.close()


@pytest.fixture
async def schema(admin: asyncpg.Connection) -> AsyncIterator[str]:
    """A fresh schema name; the store creates it on open, teardown drops it."""
    name = f"gistbot_test_{uuid.uuid4().hex[:12]}"
    yield name
    await admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
async def make_pg(schema: str) -> AsyncIterator[MakeStore]:
    opened: list[PostgresStore] = []

    async def make(**kw: object) -> PostgresStore:
        store = PostgresStore(DSN, schema=schema, **{"max_size": 4, **kw})  # type: ignore[arg-type]
        await store.open()
        opened.append(store)
        return store

    yield make  # type: ignore[misc]
    for store in opened:
        await store.close()


@pytest.fixture
async def store(make_pg: MakeStore) -> PostgresStore:
    return await make_pg()  # type: ignore[return-value]


class TestPostgresStoreContract(StoreContract):
    """The shared contract, each test on its own schema."""

    @pytest.fixture
    async def make_store(self, make_pg: MakeStore) -> AsyncIterator[MakeStore]:
        yield make_pg


# ---- schema


async def test_schema_version_and_reopening_does_not_migrate_again(
    make_pg: MakeStore, admin: asyncpg.Connection, schema: str
) -> None:
    for _ in range(3):
        s = await make_pg()
        await s.record(new_turn(KEY, "same"))
        await s.close()
    assert await admin.fetch(f'SELECT version FROM "{schema}".schema_version') == [
        (SCHEMA_VERSION,)
    ]
    assert await admin.fetchval(f'SELECT count(*) FROM "{schema}".turns') == 1


async def test_forward_migration_from_version_1_keeps_data(
    make_pg: MakeStore, admin: asyncpg.Connection, schema: str
) -> None:
    await admin.execute(f'CREATE SCHEMA "{schema}"; SET search_path = "{schema}"')
    await admin.execute(MIGRATIONS[0])
    await admin.execute("CREATE TABLE schema_version (version integer NOT NULL);"
                        "INSERT INTO schema_version VALUES (1);"
                        "INSERT INTO channels (platform, workspace, channel, next_seq) "
                        "VALUES ('discord', 'g1', 'c1', 2);"
                        "INSERT INTO turns VALUES (1, 1, 'old', 'user', 'a', 'A', 'kept', 1, 5.0)")
    s = await make_pg()
    assert [t.text for t in await s.turns(KEY)] == ["kept"]
    assert (await s.record(new_turn(KEY, "new"))).turn.seq == 2
    assert await s.try_lease(KEY, "r1", 5)  # the version-2 table exists now
    assert await admin.fetchval("SELECT version FROM schema_version") == SCHEMA_VERSION


async def test_newer_schema_is_refused_untouched(
    make_pg: MakeStore, admin: asyncpg.Connection, schema: str
) -> None:
    await admin.execute(f'CREATE SCHEMA "{schema}"; SET search_path = "{schema}"; '
                        "CREATE TABLE schema_version (version integer NOT NULL)")
    await admin.execute("INSERT INTO schema_version VALUES ($1)", SCHEMA_VERSION + 3)
    with pytest.raises(SchemaTooNewError, match="upgrade gistbot") as info:
        await make_pg()
    assert f"schema version {SCHEMA_VERSION + 3}" in str(info.value)
    tables = await admin.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
    assert [r[0] for r in tables] == ["schema_version"]


async def test_unreachable_server_is_a_clear_open_error_without_the_password() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = PostgresStore(f"postgresql://bob:s3cret@127.0.0.1:{port}/x", connect_timeout=2)
    with pytest.raises(StoreOpenError, match="cannot reach the server") as info:
        await store.open()
    assert "s3cret" not in str(info.value) and f"127.0.0.1:{port}" in str(info.value)
    await store.close()


async def test_missing_database_and_bad_schema_name_are_open_errors() -> None:
    base = DSN.rsplit("/", 1)[0]
    with pytest.raises(StoreOpenError, match="does not exist"):
        await PostgresStore(f"{base}/gistbot_no_such_db_{uuid.uuid4().hex[:6]}").open()
    with pytest.raises(StoreOpenError, match="schema name"):
        PostgresStore(DSN, schema='x"; DROP TABLE turns; --')


async def test_closed_store_raises_a_store_error(store: PostgresStore) -> None:
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.record(new_turn(KEY))


async def test_a_rejected_write_leaves_no_half_made_channel(store: PostgresStore) -> None:
    fresh = ChannelKey("discord", "g", "fresh")
    with pytest.raises(StoreError):
        await store.record(new_turn(fresh, "bad", role="system"))  # type: ignore[arg-type]
    assert fresh not in await store.channels()
    assert (await store.record(new_turn(fresh, "good"))).turn.seq == 1


# ---- leases


async def test_lease_is_exclusive_until_released_or_expired(make_pg: MakeStore) -> None:
    a, b = await make_pg(), await make_pg()  # two replicas: two pools
    assert isinstance(a, PostgresStore) and isinstance(b, PostgresStore)
    other = ChannelKey("slack", "T", "C")
    assert await a.try_lease(KEY, "replica-a", ttl=30)
    assert not await b.try_lease(KEY, "replica-b", ttl=30)
    assert await b.try_lease(other, "replica-b", ttl=30)  # per channel
    assert await a.try_lease(KEY, "replica-a", ttl=30)  # the holder renews
    assert not await b.release_lease(KEY, "replica-b")  # not b's to release
    assert not await b.try_lease(KEY, "replica-b", ttl=30)
    assert await a.release_lease(KEY, "replica-a")
    assert await b.try_lease(KEY, "replica-b", ttl=0.3)
    assert not await a.try_lease(KEY, "replica-a", ttl=30)
    await asyncio.sleep(0.5)  # replica b "died": its lease runs out
    assert await a.try_lease(KEY, "replica-a", ttl=30)
    assert not await b.release_lease(KEY, "replica-b")  # expired and taken over
    with pytest.raises(ValueError):
        await a.try_lease(KEY, "x", ttl=0)


async def test_concurrent_lease_attempts_have_one_winner(make_pg: MakeStore) -> None:
    stores = [await make_pg() for _ in range(3)]
    attempts = [s.try_lease(KEY, f"owner-{i}-{j}", ttl=30)  # type: ignore[attr-defined]
                for i, s in enumerate(stores) for j in range(10)]
    assert sum(await asyncio.gather(*attempts)) == 1


# ---- processes

_WRITER = textwrap.dedent("""
    import asyncio, json, sys
    from memory.models import ChannelKey, NewTurn
    from memory.stores.postgres.store import PostgresStore

    async def main(dsn, schema, name):
        key = ChannelKey("discord", "g1", "c1")
        async with PostgresStore(dsn, schema=schema, max_size=8) as store:
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            ids = [f"{name}-{i}" for i in range(60)] + [f"shared-{i}" for i in range(20)]
            turns = [NewTurn(key, m, "user", name, name, m, 1, 1.0) for m in ids]
            results = await asyncio.gather(*(store.record(t) for t in turns))
            print(json.dumps([[r.turn.message_id, r.turn.seq, r.created] for r in results]))

    asyncio.run(main(*sys.argv[1:]))
""")


@pytest.mark.slow
async def test_two_processes_recording_into_one_channel(make_pg: MakeStore, schema: str) -> None:
    store = await make_pg()  # migrated before the writers start
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WRITER, DSN, schema, name, cwd=ROOT, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        for name in ("p1", "p2")
    ]
    for p in procs:
        assert p.stdout is not None and p.stdin is not None
        assert (await asyncio.wait_for(p.stdout.readline(), 30)).strip() == b"ready"
    for p in procs:
        p.stdin.write(b"go\n")  # type: ignore[union-attr]
        await p.stdin.drain()  # type: ignore[union-attr]
    outputs = [await asyncio.wait_for(p.communicate(), 60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    results = [r for out, _ in outputs for r in json.loads(out.decode().strip().splitlines()[-1])]
    created = [(m, s) for m, s, c in results if c]
    assert len(created) == 140  # 2 x 60 own + 20 shared, each created exactly once
    assert len({m for m, _ in created}) == 140 and len({s for _, s in created}) == 140
    by_id = {m: s for m, s in created}
    assert all(by_id[m] == s for m, s, _ in results)  # both saw the same seq for shared ids
    stored = await store.turns(KEY, limit=1000)
    assert sorted(t.seq for t in stored) == sorted(by_id.values())
    assert [t.seq for t in stored] == sorted(t.seq for t in stored)


# ---- lost connections


async def _backend_pid(admin: asyncpg.Connection, app: str) -> int:
    pids = await admin.fetch("SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
    assert len(pids) == 1, pids
    return int(pids[0][0])


async def test_idle_connection_killed_is_replaced(
    make_pg: MakeStore, admin: asyncpg.Connection
) -> None:
    app = f"gistbot-test-{uuid.uuid4().hex[:8]}"
    store = await make_pg(min_size=1, max_size=1, application_name=app)
    await store.record(new_turn(KEY, "before"))
    pid = await _backend_pid(admin, app)
    assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    await asyncio.sleep(0.1)
    assert [t.message_id for t in await store.turns(KEY)] == ["before"]
    assert (await store.record(new_turn(KEY, "after"))).created
    assert await _backend_pid(admin, app) != pid


async def test_connection_killed_mid_operation_is_retried(
    make_pg: MakeStore, admin: asyncpg.Connection, schema: str
) -> None:
    app = f"gistbot-test-{uuid.uuid4().hex[:8]}"
    store = await make_pg(min_size=1, max_size=1, application_name=app)
    await store.record(new_turn(KEY, "first"))
    pid = await _backend_pid(admin, app)
    locker = await asyncpg.connect(DSN)
    try:
        tx = locker.transaction()
        await tx.start()  # hold the channel row, so the store's record waits mid-transaction
        await locker.execute(f'SELECT 1 FROM "{schema}".channels FOR UPDATE')
        task = asyncio.create_task(store.record(new_turn(KEY, "during")))
        for _ in range(200):
            waiting = await admin.fetchval(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid)
            if waiting == "Lock":
                break
            await asyncio.sleep(0.02)
        assert waiting == "Lock"
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        await tx.rollback()
        result = await asyncio.wait_for(task, 30)
    finally:
        await locker.close()
    assert result.created and result.turn.seq == 2
    assert [t.message_id for t in await store.turns(KEY)] == ["first", "during"]


async def test_an_answer_waiting_on_a_replicas_reset_records_nothing(
    make_pg: MakeStore, admin: asyncpg.Connection
) -> None:
    """Another replica's reset holds the channel while an answer's record waits for it: once
    the reset commits, the record finds the question gone and stores nothing (a check read
    before the wait, or one re-checked on the channel row alone, would still insert)."""
    from memory.stores.postgres import queries

    app = f"gistbot-test-{uuid.uuid4().hex[:8]}"
    store = await make_pg(min_size=1, max_size=1, application_name=app)
    replica: PostgresStore = await make_pg()  # type: ignore[assignment]
    asked = (await store.record(new_turn(KEY, "q1"))).turn
    pid = await _backend_pid(admin, app)
    holding, commit = asyncio.Event(), asyncio.Event()

    async def reset_and_hold(conn: asyncpg.Connection) -> None:
        await queries.reset(conn, KEY)
        holding.set()
        await commit.wait()

    resetting = asyncio.create_task(replica.tx(reset_and_hold))
    await asyncio.wait_for(holding.wait(), 10)
    answer = replace(new_turn(KEY, "reply:q1", role="assistant"),
                     answers=TurnRef(asked.seq, "q1"))
    recording = asyncio.create_task(store.record(answer))
    deadline = asyncio.get_running_loop().time() + 10
    while await admin.fetchval(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid) != "Lock":
        assert asyncio.get_running_loop().time() < deadline, "the record never waited"
        await asyncio.sleep(0.02)
    commit.set()
    await asyncio.wait_for(resetting, 10)
    with pytest.raises(AnsweredTurnGone):
        await asyncio.wait_for(recording, 10)
    assert await store.turns(KEY) == []


async def test_hot_queries_use_indexes_on_a_long_history(
    store: PostgresStore, admin: asyncpg.Connection, schema: str
) -> None:
    """With 20,000 archived turns, the hot statements read turns by index range or point
    (any Sort is over at most LIMIT rows), so their cost does not grow with history."""
    from memory.stores.postgres import queries

    await store.record(new_turn(KEY, "seed"))
    await admin.execute(f'SET search_path = "{schema}"')
    await admin.execute(
        "INSERT INTO turns SELECT 1, g, 'h' || g, 'user', 'a', 'A', 'x', 1, g "
        "FROM generate_series(2, 20001) g; "
        "UPDATE channels SET next_seq = 20002, folded_through = 19990; ANALYZE")
    args = ("discord", "g1", "c1")
    statements = [
        (queries.FIND_TURN, (*args, "h5")),
        (queries.NEWEST_UNFOLDED, (1, 19990, 2**62, 400)),
        (queries.PENDING, (*args, 1600)),
        (queries.PENDING_SIZE, args),
        (queries.HEADER, args),
        (queries.FACTS, (1, 500)),
        (queries.SEQ_OF, (1, "h7")),
    ]
    for sql, params in statements:
        plan = "\n".join(r[0] for r in await admin.fetch(f"EXPLAIN {sql}", *params))
        assert "Seq Scan on turns" not in plan, (sql, plan)
        if "FROM turns" in sql or "JOIN turns" in sql:
            # a range or point on the turns key, never "all of this channel's turns"
            assert re.search(r"Index Cond: \(\(channel_id = \S+\) AND \((seq|message_id) ",
                             plan), (sql, plan)


# ---------------------------------------------------------------------------- turn search


async def test_turns_of_version_3_are_indexed_at_open(
    make_pg: MakeStore, admin: asyncpg.Connection, schema: str
) -> None:
    from memory.search_text import query_terms

    await admin.execute(f'CREATE SCHEMA "{schema}"; SET search_path = "{schema}"')
    for script in MIGRATIONS[:3]:
        await admin.execute(script)
    await admin.execute(
        "CREATE TABLE schema_version (version integer NOT NULL);"
        "INSERT INTO schema_version VALUES (3);"
        "INSERT INTO channels (platform, workspace, channel, next_seq) "
        "VALUES ('discord', 'g1', 'c1', 3);"
        "INSERT INTO turns VALUES (1, 1, 'm1', 'user', 'a', 'A', 'order ORD-7731 late', 1, 5.0),"
        " (1, 2, 'm2', 'user', 'a', 'A', '프로젝트 마감은 금요일', 1, 6.0)")
    s = await make_pg()
    assert [t.seq for t in await s.search_turns(KEY, query_terms("ORD-7731"), before_seq=9)] == [1]
    assert [t.seq for t in await s.search_turns(KEY, query_terms("마감"), before_seq=9)] == [2]
    assert await admin.fetchval("SELECT count(*) FROM turns WHERE terms IS NULL") == 0
    # a turn an older replica wrote after the upgrade (no terms) is indexed at the next open
    await admin.execute("INSERT INTO turns VALUES (1, 3, 'm3', 'user', 'a', 'A', '締切日', 1, 7.0)")
    await s.close()
    s = await make_pg()
    assert [t.seq for t in await s.search_turns(KEY, query_terms("締切"), before_seq=9)] == [3]


async def test_turns_of_version_11_are_stemmed_at_open(
    make_pg: MakeStore, admin: asyncpg.Connection, schema: str
) -> None:
    from memory.search_text import query_terms

    await admin.execute(f'CREATE SCHEMA "{schema}"; SET search_path = "{schema}"')
    for script in MIGRATIONS[:11]:
        if script:  # (empty: a step whose tables ``bot.stores`` now migrates)
            await admin.execute(script)
    await admin.execute(
        "CREATE TABLE schema_version (version integer NOT NULL);"
        "INSERT INTO schema_version VALUES (11);"
        "INSERT INTO channels (platform, workspace, channel, next_seq) "
        "VALUES ('discord', 'g1', 'c1', 3);"
        "INSERT INTO turns (channel_id, seq, message_id, role, author_id, author_name, text, "
        "tokens, sent_at, terms) VALUES "
        "(1, 1, 'm1', 'user', 'a', 'A', 'we were cooking all night', 1, 5.0, "
        " to_tsvector('simple', 'a we were cooking all night')),"
        "(1, 2, 'm2', 'user', 'a', 'A', '프로젝트 마감은 금요일', 1, 6.0, "
        " to_tsvector('simple', 'a 프로 로젝 젝트 마감 감은 금요 요일'))")
    s = await make_pg()
    assert [t.seq for t in await s.search_turns(KEY, query_terms("who cooked?"),
                                                before_seq=9)] == [1]
    assert [t.seq for t in await s.search_turns(KEY, query_terms("마감"), before_seq=9)] == [2]
    assert await admin.fetchval("SELECT version FROM schema_version") == SCHEMA_VERSION
    assert await admin.fetchval("SELECT count(*) FROM turns WHERE terms IS NULL") == 0


async def test_a_version_12_schema_gains_turn_vectors_that_deletes_drop(
    make_pg: MakeStore, admin: asyncpg.Connection, schema: str
) -> None:
    from memory.embedding_store import pack

    await admin.execute(f'CREATE SCHEMA "{schema}"; SET search_path = "{schema}"')
    for script in MIGRATIONS[:12]:
        if script.strip():  # the steps of storage roles that left memory are empty
            await admin.execute(script)
    await admin.execute(
        "CREATE TABLE schema_version (version integer NOT NULL);"
        "INSERT INTO schema_version VALUES (12);"
        "INSERT INTO channels (platform, workspace, channel, next_seq) "
        "VALUES ('discord', 'g1', 'c1', 3);"
        "INSERT INTO turns (channel_id, seq, message_id, role, author_id, author_name, text, "
        "tokens, sent_at) VALUES (1, 1, 'm1', 'user', 'a', 'A', 'we flew to Rio', 1, 5.0),"
        "(1, 2, 'm2', 'user', 'a', 'A', 'and back', 1, 6.0)")
    s = await make_pg()
    turns = await s.turns(KEY)
    assert await s.put_embeddings(KEY, "m", [(t, pack([1.0, float(t.seq)])) for t in turns]) == 2
    assert await s.delete(KEY, "m2") == "deleted"
    assert await admin.fetchval("SELECT version FROM schema_version") == SCHEMA_VERSION
    assert [r[0] for r in await admin.fetch("SELECT seq FROM turn_embeddings")] == [1]


async def test_turn_search_uses_the_gin_index(
    store: PostgresStore, admin: asyncpg.Connection, schema: str
) -> None:
    from memory.stores.postgres import turn_search

    await store.record(new_turn(KEY, "seed", "zeppelin"))
    await admin.execute(f'SET search_path = "{schema}"')
    await admin.execute(
        "INSERT INTO turns SELECT 1, g, 'h' || g, 'user', 'a', 'A', 'x', 1, g, "
        "to_tsvector('simple', 'word' || g) FROM generate_series(2, 20001) g; ANALYZE")
    plan = "\n".join(r[0] for r in await admin.fetch(
        f"EXPLAIN {turn_search.SEARCH_TURNS}", 1, 30_000, "'word77'", 40))
    assert "turns_terms" in plan and "Seq Scan" not in plan, plan
    plan = "\n".join(r[0] for r in await admin.fetch(
        f"EXPLAIN {turn_search.TURNS_AT}", 1, [3, 4]))
    assert "Seq Scan" not in plan, plan
