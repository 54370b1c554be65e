"""PostgreSQL faults under Slack (issue 14): a lost connection — asyncpg's
``InternalClientError`` ("cannot switch to state …") and ``ConnectionDoesNotExistError``
included — is retried with backoff; one that stays lost is a ``StoreUnavailableError``
(reported once a minute, not acknowledged); and backends terminated three times during 600
Slack events lose nothing acknowledged and store nothing twice.

Each test has its own schema on 127.0.0.1:5432 database ``test`` (``GISTBOT_TEST_POSTGRES_URL``
overrides); skipped only when nothing listens there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from memory.errors import StoreUnavailableError
from memory.models import ChannelKey
from memory.stores.faults import REPORT
from tests.harness.postgres import PG, reachable
from tests.harness.slack import FakeLLM, mention, open_harness
from tests.harness.store_contract import new_turn

asyncpg = pytest.importorskip("asyncpg", reason="the postgres extra (asyncpg) is not installed")

from memory.stores.postgres import errors, queries  # noqa: E402
from memory.stores.postgres.store import PostgresStore  # noqa: E402

DSN = PG
KEY = ChannelKey("discord", "g1", "c1")


pytestmark = pytest.mark.skipif(
    not reachable(DSN), reason=f"no PostgreSQL listening for {urlsplit(DSN).netloc}"
)


@pytest.fixture
async def admin() -> AsyncIterator[Any]:
    conn = await asyncpg.connect(DSN)
    yield conn
    await conn.close()


@pytest.fixture
async def schema(admin: Any) -> AsyncIterator[str]:
    name = f"gistbot_test_{uuid.uuid4().hex[:12]}"
    yield name
    await admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(autouse=True)
def fresh_report() -> None:
    REPORT.reset()


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.exceptions.InternalClientError(
            "cannot switch to state 12; another operation (2) is in progress"),
        asyncpg.exceptions.ConnectionDoesNotExistError(
            "connection was closed in the middle of operation"),
    ],
    ids=["InternalClientError", "ConnectionDoesNotExistError"],
)
async def test_lost_connection_errors_are_retried(
    error: Exception, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = {"left": 3}
    real = queries.record

    async def flaky(conn: Any, *, turn: Any, hooks: Any = ()) -> Any:
        if failures["left"]:
            failures["left"] -= 1
            raise error
        return await real(conn, turn=turn, hooks=hooks)

    monkeypatch.setattr(queries, "record", flaky)
    async with PostgresStore(DSN, schema=schema, max_size=2) as store:
        result = await store.record(new_turn(KEY, "m1"))
        assert result.created and failures["left"] == 0  # three losses, then stored
        assert [t.message_id for t in await store.turns(KEY)] == ["m1"]


async def test_a_connection_that_stays_lost_is_unavailable_and_reported_once(
    schema: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def dead(conn: Any, *, turn: Any, hooks: Any = ()) -> Any:
        raise asyncpg.exceptions.InternalClientError("cannot switch to state 15")

    monkeypatch.setattr(errors, "RETRY_DELAYS", (0.01, 0.01))
    async with PostgresStore(DSN, schema=schema, max_size=2) as store:
        monkeypatch.setattr(queries, "record", dead)
        for i in range(5):
            with pytest.raises(StoreUnavailableError) as raised:
                await store.record(new_turn(KEY, f"m{i}"))
            assert raised.value.cause == "connection lost"
        reports = [r for r in caplog.records
                   if r.levelno >= logging.ERROR and "(connection lost)" in r.getMessage()]
        assert len(reports) == 1
        monkeypatch.undo()
        assert (await store.record(new_turn(KEY, "back"))).created


def test_disk_full_and_read_only_are_classified() -> None:
    full = errors.translate(asyncpg.exceptions.DiskFullError("could not extend file"))
    ro = errors.translate(asyncpg.exceptions.ReadOnlySQLTransactionError(
        "cannot execute INSERT in a read-only transaction"))
    assert isinstance(full, StoreUnavailableError) and full.cause == "disk full"
    assert isinstance(ro, StoreUnavailableError) and ro.cause == "read-only"


@pytest.mark.slow
async def test_backends_terminated_three_times_during_600_slack_events_lose_nothing(
    tmp_path: Path, schema: str, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = f"gistbot-ack-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr("memory.stores.postgres.store.PostgresStore",
                        functools.partial(PostgresStore, application_name=app))
    llm = FakeLLM()
    env = {"DATABASE_URL": f"{DSN}#{schema}"}
    async with open_harness(tmp_path, llm, env) as h:
        total, kills_at = 600, {150, 300, 450}
        status: dict[int, int] = {}
        killed = 0

        def event(i: int) -> dict[str, Any]:
            text = f"<@UBOT> q{i}" if i % 50 == 0 else f"message {i}"
            return mention(text, ts=f"{1700000000 + i}.000100", kind="message")

        async def send(i: int, retry: int | None = None) -> None:
            status[i] = await h.event(event(i), event_id=f"Ev{i}", retry=retry)

        async def kill() -> None:
            nonlocal killed
            await asyncio.sleep(0.01)  # while the batch's writes are in flight
            for _ in range(500):  # after a kill the pool reconnects only when next used
                pids = await admin.fetch(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
                if pids:
                    break
                await asyncio.sleep(0.01)
            assert pids, "no backend of the bot to terminate"
            for row in pids:
                await admin.fetchval("SELECT pg_terminate_backend($1)", row["pid"])
            killed += 1

        for start in range(0, total, 25):
            batch = [send(i) for i in range(start, start + 25)]
            await asyncio.gather(*batch, *([kill()] if start in kills_at else []))
        assert killed == 3
        for attempt in range(1, 4):  # Slack re-delivers what did not get a 200
            again = [i for i, s in status.items() if s != 200]
            await asyncio.gather(*(send(i, attempt) for i in again))
        await h.settle()
        acked = {i for i, s in status.items() if s == 200}
        assert acked == set(range(total)), f"never acknowledged: {set(range(total)) - acked}"
        rows = await admin.fetch(
            f'SELECT message_id FROM "{schema}".turns WHERE role = \'user\'')
        ids = [r["message_id"] for r in rows]
        assert len(ids) == len(set(ids)), "a message was stored twice"
        lost = {f"{1700000000 + i}.000100" for i in acked} - set(ids)
        assert not lost, f"{len(lost)} acknowledged but not stored"
        replies = await admin.fetchval(
            f'SELECT count(*) FROM "{schema}".turns WHERE role = \'assistant\'')
        # At most one answer per mention. A mention whose commit landed just before its
        # connection died reads as already stored on the retry and is not answered here:
        # answering those is issue 14's third item (missed mentions), not this test's.
        assert 0 < replies <= total // 50


async def test_read_only_postgres_acknowledges_nothing_and_recovers(
    tmp_path: Path, schema: str, admin: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL's read-only: the bot's role gets ``default_transaction_read_only``
    (as on a standby, or an operator's emergency switch), then is switched back."""
    role = f"gistbot_ro_{uuid.uuid4().hex[:8]}"
    await admin.execute(f'CREATE ROLE "{role}" LOGIN')
    await admin.execute(f'GRANT CREATE ON DATABASE "{urlsplit(DSN).path.lstrip("/")}" TO "{role}"')
    parts = urlsplit(DSN)
    dsn = f"{parts.scheme}://{role}@{parts.hostname}:{parts.port or 5432}{parts.path}"

    async def kick() -> None:  # sessions take the role's setting when they start
        await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE usename = $1", role)  # fmt: skip

    caplog.set_level(logging.INFO)
    try:
        async with open_harness(tmp_path, FakeLLM(), {"DATABASE_URL": f"{dsn}#{schema}"}) as h:
            ts = [f"{1700000000 + i}.000100" for i in range(12)]
            assert await h.event(mention("before", ts=ts[0], kind="message"),
                                 event_id="Ev0") == 200  # fmt: skip
            await admin.execute(f'ALTER ROLE "{role}" SET default_transaction_read_only = on')
            await kick()
            refused = [await h.event(mention(f"m{i}", ts=ts[i], kind="message"),
                                     event_id=f"Ev{i}") for i in range(1, 11)]  # fmt: skip
            assert set(refused) == {503}  # nothing acknowledged
            reports = [r for r in caplog.records
                       if r.levelno >= logging.ERROR and "(read-only)" in r.getMessage()]
            assert len(reports) == 1  # once a minute, not per event
            await admin.execute(f'ALTER ROLE "{role}" RESET default_transaction_read_only')
            await kick()
            again = [await h.event(mention(f"m{i}", ts=ts[i], kind="message"),
                                   event_id=f"Ev{i}", retry=1) for i in range(1, 11)]
            assert set(again) == {200}
            await h.settle()
            rows = await admin.fetch(f'SELECT message_id FROM "{schema}".turns')
            ids = [r["message_id"] for r in rows]
            assert sorted(ids) == sorted(ts[:11]) and len(ids) == len(set(ids))
    finally:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await kick()
        await admin.execute(f'REVOKE ALL ON DATABASE "{urlsplit(DSN).path.lstrip("/")}" '
                            f'FROM "{role}"')  # fmt: skip
        await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
