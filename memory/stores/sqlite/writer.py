"""The group-commit writer of ``SqliteStore``: every write goes through one queue to one
connection.

The writer takes everything queued (up to ``batch_size``), runs it in one ``BEGIN
IMMEDIATE`` … ``COMMIT`` inside aiosqlite's worker thread (one thread hop per batch, not
per statement), then resolves each caller's future. A caller's ``run()`` returns only after
the COMMIT that contains its operation, so acknowledged means durable; under load one fsync
covers hundreds of operations. Each operation runs under its own SAVEPOINT, so one bad
operation fails alone and the rest of the batch commits. ``before_commit`` runs once per
batch, after the operations and before the COMMIT (the store indexes new turns there);
``after_commit`` after it, on the event loop (the store's ``checkpointer`` hears of it).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar

import aiosqlite

from memory.errors import StoreBusyError, StoreError
from memory.models import ChannelKey
from memory.stores.faults import REPORT, unavailable

__all__ = ["GroupCommitWriter", "WriteTx", "raw_connection", "translate", "unavailable_cause"]

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(slots=True)
class WriteTx:
    """What one write operation gets: the connection, inside its batch's transaction, and
    the channel ids known so far (committed ones, and those this batch created)."""

    conn: sqlite3.Connection
    committed: Mapping[ChannelKey, int]
    created: dict[ChannelKey, int] = field(default_factory=dict)

    def channel_id(self, key: ChannelKey, *, create: bool) -> int | None:
        """The channel's row id; with ``create``, a new row when it has none."""
        cid = self.committed.get(key) or self.created.get(key)
        if cid is not None:
            return cid
        args = (key.platform, key.workspace, key.channel)
        row = self.conn.execute(
            "SELECT id FROM channels WHERE platform = ? AND workspace = ? AND channel = ?", args
        ).fetchone()
        if row is None:
            if not create:
                return None
            row = self.conn.execute(
                "INSERT INTO channels (platform, workspace, channel) VALUES (?, ?, ?) "
                "RETURNING id",
                args,
            ).fetchone()
        self.created[key] = int(row[0])
        return int(row[0])

    def new_channel_id(self, key: ChannelKey) -> int:
        """The channel's row id, creating the row if needed."""
        cid = self.channel_id(key, create=True)
        assert cid is not None
        return cid


_Op = tuple[Callable[[WriteTx], Any], "asyncio.Future[Any]"]
_Outcome = tuple[bool, Any]  # (succeeded, result or exception)


def raw_connection(conn: aiosqlite.Connection | None) -> sqlite3.Connection:
    """The ``sqlite3`` connection under ``conn``, for code running in its thread.

    aiosqlite exposes no public way to run several statements in one thread hop;
    ``_conn`` / ``_execute`` are the documented-in-source internals we rely on."""
    assert conn is not None
    raw: sqlite3.Connection = conn._conn
    return raw


_UNAVAILABLE = {  # SQLite's primary result codes that no retry of the write fixes
    "SQLITE_FULL": "disk full",
    "SQLITE_READONLY": "read-only",
    "SQLITE_CANTOPEN": "read-only",  # a journal or WAL file cannot be created
    "SQLITE_IOERR": "disk I/O error",
}


def unavailable_cause(exc: BaseException) -> str | None:
    """``StoreUnavailableError``'s cause for a sqlite3 error (disk full, read-only, I/O), or
    None when the error is about the operation rather than the disk."""
    name = getattr(exc, "sqlite_errorname", None)
    if not isinstance(exc, sqlite3.Error) or not isinstance(name, str):
        return None
    primary = "_".join(name.split("_")[:2])  # SQLITE_IOERR_WRITE -> SQLITE_IOERR
    return _UNAVAILABLE.get(primary)


def translate(exc: BaseException) -> BaseException:
    """Map sqlite3 errors to the store's error classes, keeping the cause; a full disk or a
    read-only database becomes ``StoreUnavailableError``, reported once a minute per cause."""
    if (cause := unavailable_cause(exc)) is not None:
        return unavailable(cause, exc)
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        err: StoreError = StoreBusyError("the database is locked by another writer")
    elif isinstance(exc, sqlite3.Error):
        err = StoreError(f"database error: {exc}")
    else:
        return exc
    err.__cause__ = exc
    return err


class GroupCommitWriter:
    """One writer task on one connection; see the module docstring.

    ``channel_ids`` caches channel row ids; an id enters it only once the batch that
    created the row has committed."""

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        batch_size: int,
        before_commit: Callable[[sqlite3.Connection], object] | None = None,
        after_commit: Callable[[], object] | None = None,
    ) -> None:
        self._conn = conn
        self.batch_size = batch_size
        self.before_commit = before_commit
        self.after_commit = after_commit
        self.channel_ids: dict[ChannelKey, int] = {}
        self._queue: asyncio.Queue[_Op | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the writer task."""
        self._task = asyncio.create_task(self._loop(), name="gistbot-sqlite-writer")

    async def close(self) -> None:
        """Let queued writes finish, then stop. Idempotent."""
        if self._task is not None:
            await self._queue.put(None)
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run(
        self, fn: Callable[Concatenate[WriteTx, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``fn(tx, *args, **kwargs)`` in the next batch; returns after its COMMIT."""
        if self._task is None or self._task.done():
            raise StoreError("the store is closed")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((lambda tx: fn(tx, *args, **kwargs), fut))
        return await fut

    async def _loop(self) -> None:
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < self.batch_size and not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is None:
                    stopping = True
                    break
                batch.append(nxt)
            try:
                results, new_ids = await self._conn._execute(  # type: ignore[no-untyped-call]
                    self._run_batch, batch
                )
            except BaseException as e:  # the COMMIT itself failed: nothing in the batch landed
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(translate(e))
                if isinstance(e, asyncio.CancelledError):
                    raise
                continue
            self.channel_ids.update(new_ids)
            if self.after_commit is not None:
                self.after_commit()
            if REPORT.active and all(ok for ok, _ in results):
                REPORT.succeeded()
            for (_, fut), (ok, value) in zip(batch, results, strict=True):
                if fut.done():
                    continue
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(translate(value))

    def _run_batch(self, batch: list[_Op]) -> tuple[list[_Outcome], dict[ChannelKey, int]]:
        """Runs in aiosqlite's thread: one transaction, one savepoint per operation."""
        conn = raw_connection(self._conn)
        tx = WriteTx(conn, self.channel_ids)
        results: list[_Outcome] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op, _ in batch:
                conn.execute("SAVEPOINT op")
                known = len(tx.created)
                try:
                    results.append((True, op(tx)))
                    conn.execute("RELEASE op")
                except Exception as e:
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    # A channel row this op created was rolled back: forget its id, or the
                    # next op (and the id cache) would use a row that does not exist.
                    for key in list(tx.created)[known:]:
                        del tx.created[key]
                    results.append((False, e))
            if self.before_commit is not None:  # outside every operation's savepoint
                self.before_commit(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results, tx.created
