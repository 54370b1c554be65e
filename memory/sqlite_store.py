"""``SqliteStore``: the default ``Store``, one SQLite file in WAL mode, on aiosqlite.

Why it looks the way it does:

* **Group commit.** Every write goes through one queue to one writer connection. The writer
  takes everything queued (up to ``batch_size``), runs it in one ``BEGIN IMMEDIATE`` …
  ``COMMIT`` inside aiosqlite's worker thread (one thread hop per batch, not per
  statement), then resolves each caller's future. A caller's ``record()`` returns only
  after the COMMIT that contains its turn, so acknowledged means durable; under load one
  fsync covers hundreds of turns. Each operation runs under its own SAVEPOINT, so one bad
  operation fails alone and the rest of the batch commits.
* **Reads on a second connection.** WAL lets the reader see the last committed state while
  the writer works; a view runs in one read transaction, so summary, fold pointer and turns
  are mutually consistent.
* Parameterized SQL only; the schema lives in ``memory.sqlite_schema``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import aiosqlite

from memory.errors import SchemaTooNewError, StoreBusyError, StoreError, StoreOpenError
from memory.models import (
    ChannelFact,
    ChannelKey,
    ChannelStats,
    Episode,
    Fact,
    NewChannelFact,
    NewEpisode,
    NewTurn,
    Recall,
    RecordResult,
    SummaryState,
    Turn,
)
from memory.search_text import terms
from memory.sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from memory.store import ChangeOutcome, ResetResult

__all__ = ["SqliteStore"]

log = logging.getLogger(__name__)

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
_Row = TypeVar("_Row")
_TURN_COLS = "seq, message_id, role, author_id, author_name, text, tokens, sent_at"
_Op = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]


def _turn(key: ChannelKey, row: Sequence[Any]) -> Turn:
    return Turn(key, int(row[0]), row[1], row[2], row[3], row[4], row[5], int(row[6]), row[7])


def _fact(row: Sequence[Any]) -> Fact:
    return Fact(row[0], row[1], int(row[2]), int(row[3]))


_EPISODE_COLS = "e.id, e.first_seq, e.last_seq, e.started_at, e.ended_at, e.speakers, e.text"
_CFACT_COLS = "f.id, f.text, f.source_seqs, f.author, f.pinned, f.created_at, f.superseded_by"


def _episode(key: ChannelKey, row: Sequence[Any]) -> Episode:
    speakers = tuple(json.loads(row[5]))
    return Episode(key, int(row[0]), int(row[1]), int(row[2]), row[3], row[4], speakers, row[6])


def _seqs(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def _cfact(key: ChannelKey, row: Sequence[Any]) -> ChannelFact:
    by = None if row[6] is None else int(row[6])
    return ChannelFact(key, int(row[0]), row[1], _seqs(row[2]), row[3], bool(row[4]), row[5], by)


RAREST_TERMS = 4
"""Most query terms one archive search uses, the rarest first (see ``_rarest``)."""
COMMON_TERM_DOCS = 500
"""A term in more archived items than this is too common to tell them apart; a query made
only of such terms recalls nothing rather than scoring most of the archive."""


def _rarest(conn: sqlite3.Connection, vocab: str, query: Sequence[str]) -> list[str]:
    """The query's ``RAREST_TERMS`` rarest terms that occur in the index, common ones left out.

    Rare terms carry the meaning ("ORD-1042", "deadline"); common ones match most rows and
    would make BM25 score much of the archive. Counts are over all channels, which ranks
    terms well enough and keeps this a handful of index lookups.
    """
    marks = ",".join("?" * len(query))
    counts = dict(
        conn.execute(f"SELECT term, doc FROM {vocab} WHERE term IN ({marks})", tuple(query))
    )
    useful = [t for t in query if 0 < counts.get(t, 0) <= COMMON_TERM_DOCS]
    return sorted(useful, key=lambda t: counts[t])[:RAREST_TERMS]


def _fts_query(cid: int, query: Sequence[str]) -> str:
    """``chan:c<id> AND terms:("a" OR "b")``; terms are quoted, so none is an operator."""
    quoted = " OR ".join('"' + t.replace('"', '""') + '"' for t in query)
    return f"chan:c{cid} AND terms:({quoted})"


def _insert_episode(conn: sqlite3.Connection, cid: int, e: NewEpisode) -> int:
    (eid,) = conn.execute(
        "INSERT INTO episodes (channel_id, first_seq, last_seq, started_at, ended_at, "
        "speakers, text) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (cid, e.first_seq, e.last_seq, e.started_at, e.ended_at, json.dumps(e.speakers), e.text),
    ).fetchone()
    conn.execute(
        "INSERT INTO episodes_fts (rowid, chan, terms) VALUES (?, ?, ?)",
        (eid, f"c{cid}", terms(" ".join([e.text, *e.speakers]))),
    )
    return int(eid)


def _insert_cfact(conn: sqlite3.Connection, cid: int, f: NewChannelFact, now: float) -> int:
    (fid,) = conn.execute(
        "INSERT INTO memory_facts (channel_id, text, source_seqs, author, pinned, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (cid, f.text, ",".join(map(str, f.source_seqs)), f.author, int(f.pinned), now),
    ).fetchone()
    conn.execute(
        "INSERT INTO memory_facts_fts (rowid, chan, terms) VALUES (?, ?, ?)",
        (fid, f"c{cid}", terms(f.text)),
    )
    if f.supersedes is not None:  # only a fact of the same channel, and only once
        conn.execute(
            "UPDATE memory_facts SET superseded_by = ? WHERE id = ? AND channel_id = ? "
            "AND superseded_by IS NULL",
            (fid, f.supersedes, cid),
        )
    return int(fid)


def _translate(exc: BaseException) -> BaseException:
    """Map sqlite3 errors to the store's error classes, keeping the cause."""
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        err: StoreError = StoreBusyError("the database is locked by another writer")
    elif isinstance(exc, sqlite3.Error):
        err = StoreError(f"database error: {exc}")
    else:
        return exc
    err.__cause__ = exc
    return err


class SqliteStore:
    """A ``Store`` on one SQLite file. See the module docstring for the design."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        synchronous: Synchronous = "FULL",
        batch_size: int = 512,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous
        self.batch_size = batch_size
        self._w: aiosqlite.Connection | None = None
        self._r: aiosqlite.Connection | None = None
        self._queue: asyncio.Queue[_Op | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._ids: dict[ChannelKey, int] = {}

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Open both connections, set WAL, migrate; explain what to fix on failure."""
        if str(self.path) != ":memory:":
            parent = self.path.parent
            if not parent.exists():
                try:
                    parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise StoreOpenError(
                        f"cannot create the folder for the database {self.path}: {e.strerror}; "
                        "set DATABASE_URL to a writable location"
                    ) from e
        try:
            self._w = await aiosqlite.connect(self.path, isolation_level=None)
            await self._w.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            mode = await self._w.execute_fetchall("PRAGMA journal_mode = WAL")
            if str(next(iter(mode))[0]).lower() != "wal":
                log.warning("SQLite refused WAL mode for %s; using %s", self.path, mode)
            await self._w.execute(f"PRAGMA synchronous = {self.synchronous}")
            await self._w.execute("PRAGMA foreign_keys = ON")
            await self._w._execute(  # type: ignore[no-untyped-call]
                lambda: self._migrate(self._raw(self._w))
            )
            if str(self.path) == ":memory:":
                # A second connection would open a second, empty database. The writer's
                # thread runs each batch whole, so reads on it still see committed state.
                self._r = self._w
            else:
                self._r = await aiosqlite.connect(self.path, isolation_level=None)
                await self._r.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
                await self._r.execute("PRAGMA query_only = 1")
        except BaseException as e:
            await self.close()
            if not isinstance(e, sqlite3.DatabaseError):
                raise
            msg = str(e)
            if "not a database" in msg or "malformed" in msg:
                hint = "it is not a SQLite database or it is corrupt; move it aside or restore it"
            elif "readonly" in msg or "unable to open" in msg:
                hint = "the file or its folder is not writable; fix permissions or DATABASE_URL"
            else:
                hint = msg
            raise StoreOpenError(f"cannot open the database {self.path}: {hint}") from e
        self._writer = asyncio.create_task(self._write_loop(), name="gistbot-sqlite-writer")

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"this database has schema version {current}, but this gistbot knows only "
                f"up to {SCHEMA_VERSION}; upgrade gistbot or use another DATABASE_URL"
            )
        for version in range(current, SCHEMA_VERSION):
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("DELETE FROM schema_version")
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version + 1,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    async def close(self) -> None:
        """Let queued writes finish, then close both connections. Idempotent."""
        if self._writer is not None:
            await self._queue.put(None)
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        for conn in (self._w, self._r if self._r is not self._w else None):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
        self._w = self._r = None

    async def __aenter__(self) -> SqliteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ write path

    async def _submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._writer is None or self._writer.done():
            raise StoreError("the store is closed")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((fn, args, fut))
        return await fut

    async def _write_loop(self) -> None:
        assert self._w is not None
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
                results, new_ids = await self._w._execute(  # type: ignore[no-untyped-call]
                    self._run_batch, batch
                )
            except BaseException as e:  # the COMMIT itself failed: nothing in the batch landed
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(_translate(e))
                if isinstance(e, asyncio.CancelledError):
                    raise
                continue
            self._ids.update(new_ids)
            for (_, _, fut), (ok, value) in zip(batch, results, strict=True):
                if fut.done():
                    continue
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(_translate(value))

    def _run_batch(self, batch: list[_Op]) -> tuple[list[tuple[bool, Any]], dict[ChannelKey, int]]:
        """Runs in aiosqlite's thread: one transaction, one savepoint per operation."""
        conn = self._raw(self._w)
        new_ids: dict[ChannelKey, int] = {}
        results: list[tuple[bool, Any]] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for fn, args, _ in batch:
                conn.execute("SAVEPOINT op")
                known = len(new_ids)
                try:
                    results.append((True, fn(conn, new_ids, *args)))
                    conn.execute("RELEASE op")
                except Exception as e:
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    # A channel row this op created was rolled back: forget its id, or the
                    # next op (and the id cache) would use a row that does not exist.
                    for key in list(new_ids)[known:]:
                        del new_ids[key]
                    results.append((False, e))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return results, new_ids

    @staticmethod
    def _raw(conn: aiosqlite.Connection | None) -> sqlite3.Connection:
        # aiosqlite exposes no public way to run several statements in one thread hop;
        # ``_conn`` / ``_execute`` are the documented-in-source internals we rely on.
        assert conn is not None
        raw: sqlite3.Connection = conn._conn
        return raw

    def _channel_id(
        self,
        conn: sqlite3.Connection,
        new_ids: dict[ChannelKey, int],
        key: ChannelKey,
        create: bool,
    ) -> int | None:
        cid = self._ids.get(key) or new_ids.get(key)
        if cid is not None:
            return cid
        args = (key.platform, key.workspace, key.channel)
        row = conn.execute(
            "SELECT id FROM channels WHERE platform = ? AND workspace = ? AND channel = ?", args
        ).fetchone()
        if row is None:
            if not create:
                return None
            row = conn.execute(
                "INSERT INTO channels (platform, workspace, channel) VALUES (?, ?, ?) RETURNING id",
                args,
            ).fetchone()
        new_ids[key] = int(row[0])
        return int(row[0])

    def _record_sync(
        self, conn: sqlite3.Connection, new_ids: dict[ChannelKey, int], t: NewTurn
    ) -> RecordResult:
        cid = self._channel_id(conn, new_ids, t.key, create=True)
        row = conn.execute(
            f"SELECT {_TURN_COLS} FROM turns WHERE channel_id = ? AND message_id = ?",
            (cid, t.message_id),
        ).fetchone()
        if row is not None:
            return RecordResult(_turn(t.key, row), created=False)
        seq, folded_through = conn.execute(
            "UPDATE channels SET next_seq = next_seq + 1 WHERE id = ? "
            "RETURNING next_seq - 1, folded_through",
            (cid,),
        ).fetchone()
        conn.execute(
            f"INSERT INTO turns (channel_id, {_TURN_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cid,
                seq,
                t.message_id,
                t.role,
                t.author_id,
                t.author_name,
                t.text,
                t.tokens,
                t.sent_at,
            ),
        )
        turn = Turn(
            t.key,
            int(seq),
            t.message_id,
            t.role,
            t.author_id,
            t.author_name,
            t.text,
            t.tokens,
            t.sent_at,
        )
        return RecordResult(turn, created=True, pending_hint=int(seq) - int(folded_through))

    async def record(self, turn: NewTurn) -> RecordResult:
        """Store ``turn`` durably, or return the existing turn with its message id."""
        result: RecordResult = await self._submit(self._record_sync, turn)
        return result

    def _commit_sync(
        self,
        conn: sqlite3.Connection,
        new_ids: dict[ChannelKey, int],
        key: ChannelKey,
        expected_version: int,
        text: str,
        folded_through: int,
        facts: Sequence[Fact],
        now: float,
        episode: NewEpisode | None = None,
        channel_facts: Sequence[NewChannelFact] = (),
    ) -> bool:
        cid = self._channel_id(conn, new_ids, key, create=False)
        if cid is None:
            return False
        cur = conn.execute(
            "UPDATE channels SET summary = ?, folded_through = ?, version = version + 1, "
            "last_compacted_at = ?, compactions = compactions + 1 "
            "WHERE id = ? AND version = ? AND folded_through <= ? AND next_seq > ?",
            (text, folded_through, now, cid, expected_version, folded_through, folded_through),
        )
        if cur.rowcount != 1:
            return False
        conn.executemany(
            "INSERT INTO facts (channel_id, value, context, first_seq, last_seen_seq) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel_id, value) DO UPDATE SET "
            "context = excluded.context, "
            "first_seq = min(first_seq, excluded.first_seq), "
            "last_seen_seq = max(last_seen_seq, excluded.last_seen_seq)",
            [(cid, f.value, f.context, f.first_seq, f.last_seen_seq) for f in facts],
        )
        if episode is not None:
            _insert_episode(conn, cid, episode)
        for fact in channel_facts:
            _insert_cfact(conn, cid, fact, now)
        return True

    async def commit_summary(
        self,
        key: ChannelKey,
        *,
        expected_version: int,
        text: str,
        folded_through: int,
        facts: Sequence[Fact],
        now: float,
        episode: NewEpisode | None = None,
        channel_facts: Sequence[NewChannelFact] = (),
    ) -> bool:
        """Atomically install a summary if the channel's version is still ``expected_version``,
        with the episode and facts of this compaction (all or nothing)."""
        ok: bool = await self._submit(
            self._commit_sync,
            key,
            expected_version,
            text,
            folded_through,
            tuple(facts),
            now,
            episode,
            tuple(channel_facts),
        )
        return ok

    def _change_sync(
        self,
        conn: sqlite3.Connection,
        new_ids: dict[ChannelKey, int],
        key: ChannelKey,
        message_id: str,
        new: tuple[str, int] | None,
    ) -> ChangeOutcome:
        cid = self._channel_id(conn, new_ids, key, create=False)
        if cid is None:
            return "missing"
        row = conn.execute(
            "SELECT t.seq, c.folded_through FROM turns t JOIN channels c ON c.id = t.channel_id "
            "WHERE t.channel_id = ? AND t.message_id = ?",
            (cid, message_id),
        ).fetchone()
        if row is None:
            return "missing"
        if row[0] <= row[1]:
            return "folded"
        if new is None:
            conn.execute("DELETE FROM turns WHERE channel_id = ? AND seq = ?", (cid, row[0]))
        else:
            conn.execute(
                "UPDATE turns SET text = ?, tokens = ? WHERE channel_id = ? AND seq = ?",
                (new[0], new[1], cid, row[0]),
            )
        # An in-flight compaction may have read the old text: make its commit fail.
        conn.execute("UPDATE channels SET version = version + 1 WHERE id = ?", (cid,))
        return "deleted" if new is None else "updated"

    async def edit(self, key: ChannelKey, message_id: str, text: str, tokens: int) -> ChangeOutcome:
        """Replace an unfolded turn's text; a folded turn is left as summarized."""
        out: ChangeOutcome = await self._submit(self._change_sync, key, message_id, (text, tokens))
        return out

    async def delete(self, key: ChannelKey, message_id: str) -> ChangeOutcome:
        """Remove an unfolded turn; a folded turn stays represented in the summary."""
        out: ChangeOutcome = await self._submit(self._change_sync, key, message_id, None)
        return out

    def _reset_sync(
        self, conn: sqlite3.Connection, new_ids: dict[ChannelKey, int], key: ChannelKey
    ) -> ResetResult:
        cid = self._channel_id(conn, new_ids, key, create=False)
        if cid is None:
            return ResetResult(turns=0, had_summary=False, facts=0)
        (summary,) = conn.execute("SELECT summary FROM channels WHERE id = ?", (cid,)).fetchone()
        turns = conn.execute("DELETE FROM turns WHERE channel_id = ?", (cid,)).rowcount
        facts = conn.execute("DELETE FROM facts WHERE channel_id = ?", (cid,)).rowcount
        conn.execute("DELETE FROM episodes_fts WHERE chan = ?", (f"c{cid}",))
        conn.execute("DELETE FROM memory_facts_fts WHERE chan = ?", (f"c{cid}",))
        episodes = conn.execute("DELETE FROM episodes WHERE channel_id = ?", (cid,)).rowcount
        cfacts = conn.execute("DELETE FROM memory_facts WHERE channel_id = ?", (cid,)).rowcount
        # Keep the row (and next_seq) so seqs never repeat; the version bump voids any
        # compaction that read the old state.
        conn.execute(
            "UPDATE channels SET summary = '', folded_through = next_seq - 1, "
            "version = version + 1, last_compacted_at = NULL, compactions = 0 WHERE id = ?",
            (cid,),
        )
        return ResetResult(
            turns=turns,
            had_summary=bool(summary),
            facts=facts,
            episodes=episodes,
            channel_facts=cfacts,
        )

    async def reset(self, key: ChannelKey) -> ResetResult:
        """Forget the channel: turns, summary and facts."""
        out: ResetResult = await self._submit(self._reset_sync, key)
        return out

    def _purge_sync(
        self, conn: sqlite3.Connection, new_ids: dict[ChannelKey, int], cutoff: float
    ) -> int:
        conn.execute("DELETE FROM events WHERE expires_at < ?", (time.time(),))
        conn.execute(
            "DELETE FROM episodes_fts WHERE rowid IN (SELECT id FROM episodes WHERE ended_at < ?)",
            (cutoff,),
        )
        conn.execute("DELETE FROM episodes WHERE ended_at < ?", (cutoff,))
        return conn.execute(
            "DELETE FROM turns WHERE sent_at < ? AND seq <= "
            "(SELECT folded_through FROM channels c WHERE c.id = turns.channel_id)",
            (cutoff,),
        ).rowcount

    async def purge_folded_before(self, cutoff: float) -> int:
        """Retention: delete folded turns and episodes older than ``cutoff``; unfolded turns
        and channel facts are kept."""
        n: int = await self._submit(self._purge_sync, cutoff)
        return n

    # ------------------------------------------------------------------ copy-db

    def _import_turns_sync(
        self,
        conn: sqlite3.Connection,
        new_ids: dict[ChannelKey, int],
        key: ChannelKey,
        turns: Sequence[Turn],
    ) -> int:
        cid = self._channel_id(conn, new_ids, key, create=True)
        new = 0
        for t in turns:
            new += conn.execute(
                f"INSERT INTO turns (channel_id, {_TURN_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                (
                    cid,
                    t.seq,
                    t.message_id,
                    t.role,
                    t.author_id,
                    t.author_name,
                    t.text,
                    t.tokens,
                    t.sent_at,
                ),
            ).rowcount
        if turns:
            top = max(t.seq for t in turns)
            conn.execute(
                "UPDATE channels SET next_seq = max(next_seq, ?) WHERE id = ?", (top + 1, cid)
            )
        return new

    async def import_turns(self, key: ChannelKey, turns: Sequence[Turn]) -> int:
        """Copy turns in with their seqs; idempotent (see ``Store.import_turns``)."""
        n: int = await self._submit(self._import_turns_sync, key, tuple(turns))
        return n

    def _import_state_sync(
        self, conn: sqlite3.Connection, new_ids: dict[ChannelKey, int], s: SummaryState
    ) -> None:
        cid = self._channel_id(conn, new_ids, s.key, create=True)
        conn.execute(
            "UPDATE channels SET summary = ?, version = ?, folded_through = ?, "
            "last_compacted_at = ?, compactions = ?, next_seq = max(next_seq, ?) WHERE id = ?",
            (
                s.text,
                s.version,
                s.folded_through,
                s.last_compacted_at,
                s.compactions,
                s.folded_through + 1,
                cid,
            ),
        )
        conn.execute("DELETE FROM facts WHERE channel_id = ?", (cid,))
        conn.executemany(
            "INSERT INTO facts (channel_id, value, context, first_seq, last_seen_seq) "
            "VALUES (?, ?, ?, ?, ?)",
            [(cid, f.value, f.context, f.first_seq, f.last_seen_seq) for f in s.facts],
        )

    def _replace_archive_sync(
        self,
        conn: sqlite3.Connection,
        new_ids: dict[ChannelKey, int],
        key: ChannelKey,
        episodes: Sequence[Episode],
        facts: Sequence[ChannelFact],
    ) -> None:
        cid = self._channel_id(conn, new_ids, key, create=True)
        assert cid is not None
        for table in ("episodes", "memory_facts"):
            conn.execute(
                f"DELETE FROM {table}_fts WHERE rowid IN "
                f"(SELECT id FROM {table} WHERE channel_id = ?)",
                (cid,),
            )
            conn.execute(f"DELETE FROM {table} WHERE channel_id = ?", (cid,))
        for e in sorted(episodes, key=lambda e: e.id):
            _insert_episode(
                conn,
                cid,
                NewEpisode(e.first_seq, e.last_seq, e.started_at, e.ended_at, e.speakers, e.text),
            )
        copies: dict[int, int] = {}
        for f in sorted(facts, key=lambda f: f.id):
            new = NewChannelFact(f.text, f.source_seqs, f.author, f.pinned)
            copies[f.id] = _insert_cfact(conn, cid, new, f.created_at)
        for f in facts:
            if f.superseded_by in copies:
                conn.execute(
                    "UPDATE memory_facts SET superseded_by = ? WHERE id = ?",
                    (copies[f.superseded_by], copies[f.id]),
                )

    async def replace_archive(
        self, key: ChannelKey, episodes: Sequence[Episode], facts: Sequence[ChannelFact]
    ) -> None:
        """Set the channel's episodes and long-term facts to copies (see the protocol)."""
        await self._submit(self._replace_archive_sync, key, tuple(episodes), tuple(facts))

    async def import_state(self, state: SummaryState) -> None:
        """Set a channel's summary state exactly (see ``Store.import_state``)."""
        await self._submit(self._import_state_sync, state)

    # ------------------------------------------------------------------ archive

    def _add_fact_sync(
        self,
        conn: sqlite3.Connection,
        new_ids: dict[ChannelKey, int],
        key: ChannelKey,
        fact: NewChannelFact,
        now: float,
    ) -> ChannelFact:
        cid = self._channel_id(conn, new_ids, key, create=True)
        assert cid is not None
        fid = _insert_cfact(conn, cid, fact, now)
        return ChannelFact(key, fid, fact.text, fact.source_seqs, fact.author, fact.pinned, now)

    async def add_fact(self, key: ChannelKey, fact: NewChannelFact, *, now: float) -> ChannelFact:
        """Store one fact (``/remember``); creates the channel if needed."""
        out: ChannelFact = await self._submit(self._add_fact_sync, key, fact, now)
        return out

    def _delete_fact_sync(
        self,
        conn: sqlite3.Connection,
        new_ids: dict[ChannelKey, int],
        key: ChannelKey,
        fact_id: int,
    ) -> ChannelFact | None:
        cid = self._channel_id(conn, new_ids, key, create=False)
        if cid is None:
            return None
        row = conn.execute(
            "DELETE FROM memory_facts WHERE id = ? AND channel_id = ? RETURNING "
            f"{_CFACT_COLS.replace('f.', '')}",
            (fact_id, cid),
        ).fetchone()
        if row is None:
            return None
        conn.execute("DELETE FROM memory_facts_fts WHERE rowid = ?", (fact_id,))
        return _cfact(key, row)

    async def delete_fact(self, key: ChannelKey, fact_id: int) -> ChannelFact | None:
        """Delete one fact of this channel; None if the channel has no such fact."""
        out: ChannelFact | None = await self._submit(self._delete_fact_sync, key, fact_id)
        return out

    async def list_facts(
        self, key: ChannelKey, *, include_superseded: bool = True, limit: int = 200
    ) -> list[ChannelFact]:
        """The channel's facts, newest first."""
        return await self._channel_rows(
            key,
            f"SELECT {_CFACT_COLS} FROM memory_facts f WHERE channel_id = ? "
            f"{'' if include_superseded else 'AND superseded_by IS NULL '}"
            "ORDER BY id DESC LIMIT ?",
            lambda h: (h[0], limit),
            _cfact,
        )

    async def episodes(self, key: ChannelKey, *, limit: int = 20) -> list[Episode]:
        """The channel's newest episodes, newest first."""
        return await self._channel_rows(
            key,
            f"SELECT {_EPISODE_COLS} FROM episodes e WHERE channel_id = ? ORDER BY id DESC LIMIT ?",
            lambda h: (h[0], limit),
            _episode,
        )

    async def search(
        self,
        key: ChannelKey,
        query: Sequence[str],
        *,
        facts_limit: int = 8,
        episodes_limit: int = 4,
        include_superseded: bool = True,
    ) -> Recall:
        """FTS5 BM25 over this channel's facts and episodes (see ``Store.search``)."""
        if not query or (facts_limit <= 0 and episodes_limit <= 0):
            return Recall()

        def run(conn: sqlite3.Connection) -> Recall:
            h = self._header(conn, key)
            if h is None:
                return Recall()
            cid = int(h[0])
            fact_terms = _rarest(conn, "memory_facts_vocab", query)
            episode_terms = _rarest(conn, "episodes_vocab", query)
            # bm25 weights: 0 for the channel column, so only the terms rank.
            facts = (
                []
                if not fact_terms
                else conn.execute(
                    f"SELECT {_CFACT_COLS} FROM memory_facts_fts "
                    "JOIN memory_facts f ON f.id = memory_facts_fts.rowid "
                    "WHERE memory_facts_fts MATCH ? AND f.channel_id = ? "
                    f"{'' if include_superseded else 'AND f.superseded_by IS NULL '}"
                    "ORDER BY f.superseded_by IS NOT NULL, bm25(memory_facts_fts, 0.0, 1.0), "
                    "f.id DESC LIMIT ?",
                    (_fts_query(cid, fact_terms), cid, facts_limit),
                ).fetchall()
            )
            episodes = (
                []
                if not episode_terms
                else conn.execute(
                    f"SELECT {_EPISODE_COLS} FROM episodes_fts "
                    "JOIN episodes e ON e.id = episodes_fts.rowid "
                    "WHERE episodes_fts MATCH ? AND e.channel_id = ? "
                    "ORDER BY bm25(episodes_fts, 0.0, 1.0), e.id DESC LIMIT ?",
                    (_fts_query(cid, episode_terms), cid, episodes_limit),
                ).fetchall()
            )
            return Recall(
                tuple(_cfact(key, r) for r in facts), tuple(_episode(key, r) for r in episodes)
            )

        out: Recall = await self._read(run)
        return out

    # ------------------------------------------------------------------ leases and events

    @staticmethod
    def _lease_sync(
        conn: sqlite3.Connection,
        new_ids: dict[ChannelKey, int],
        key: ChannelKey,
        owner: str,
        ttl: float | None,
    ) -> bool:
        args = (key.platform, key.workspace, key.channel)
        now = time.time()
        if ttl is None:
            return (
                conn.execute(
                    "DELETE FROM leases WHERE platform = ? AND workspace = ? AND channel = ? "
                    "AND owner = ?",
                    (*args, owner),
                ).rowcount
                == 1
            )
        return (
            conn.execute(
                "INSERT INTO leases (platform, workspace, channel, owner, expires_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (platform, workspace, channel) DO UPDATE SET "
                "owner = excluded.owner, expires_at = excluded.expires_at "
                "WHERE leases.expires_at <= ? OR leases.owner = excluded.owner",
                (*args, owner, now + ttl, now),
            ).rowcount
            == 1
        )

    async def try_lease(self, key: ChannelKey, owner: str, ttl: float) -> bool:
        """Take or renew the channel's compaction lease (see ``Store.try_lease``)."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        ok: bool = await self._submit(self._lease_sync, key, owner, float(ttl))
        return ok

    async def release_lease(self, key: ChannelKey, owner: str) -> bool:
        """Give the lease back if ``owner`` holds it."""
        ok: bool = await self._submit(self._lease_sync, key, owner, None)
        return ok

    @staticmethod
    def _claim_sync(
        conn: sqlite3.Connection, new_ids: dict[ChannelKey, int], event_id: str, ttl: float
    ) -> bool:
        now = time.time()
        return (
            conn.execute(
                "INSERT INTO events (event_id, expires_at) VALUES (?, ?) "
                "ON CONFLICT (event_id) DO UPDATE SET expires_at = excluded.expires_at "
                "WHERE events.expires_at <= ?",
                (event_id, now + ttl, now),
            ).rowcount
            == 1
        )

    async def claim_event(self, event_id: str, ttl: float = 86400) -> bool:
        """True for the first claimer of ``event_id`` within ``ttl`` seconds."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        ok: bool = await self._submit(self._claim_sync, event_id, float(ttl))
        return ok

    # ------------------------------------------------------------------ read path

    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._r is None:
            raise StoreError("the store is closed")
        try:
            return await self._r._execute(  # type: ignore[no-untyped-call]
                self._in_read_tx, fn, *args
            )
        except sqlite3.Error as e:
            raise _translate(e) from e

    def _in_read_tx(self, fn: Callable[..., Any], *args: Any) -> Any:
        conn = self._raw(self._r)
        conn.execute("BEGIN")
        try:
            return fn(conn, *args)
        finally:
            conn.execute("COMMIT")

    @staticmethod
    def _header(conn: sqlite3.Connection, key: ChannelKey) -> Sequence[Any] | None:
        row: Sequence[Any] | None = conn.execute(
            "SELECT id, summary, version, folded_through, last_compacted_at, compactions "
            "FROM channels WHERE platform = ? AND workspace = ? AND channel = ?",
            (key.platform, key.workspace, key.channel),
        ).fetchone()
        return row

    def _state_sync(
        self, conn: sqlite3.Connection, key: ChannelKey, facts_limit: int
    ) -> tuple[SummaryState, int | None]:
        h = self._header(conn, key)
        if h is None:
            return SummaryState(key), None
        facts = conn.execute(
            "SELECT value, context, first_seq, last_seen_seq FROM facts WHERE channel_id = ? "
            "ORDER BY last_seen_seq DESC LIMIT ?",
            (h[0], facts_limit),
        ).fetchall()
        state = SummaryState(
            key, h[1], int(h[2]), int(h[3]), h[4], int(h[5]), tuple(_fact(f) for f in facts)
        )
        return state, int(h[0])

    async def state(self, key: ChannelKey, *, facts_limit: int = 500) -> SummaryState:
        """The committed state; an unknown channel is an empty state at version 0."""
        state, _ = await self._read(self._state_sync, key, facts_limit)
        return state  # type: ignore[no-any-return]

    def _snapshot_sync(
        self,
        conn: sqlite3.Connection,
        key: ChannelKey,
        limit: int,
        facts_limit: int,
        through_seq: int | None,
    ) -> tuple[SummaryState, list[Turn]]:
        state, cid = self._state_sync(conn, key, facts_limit)
        if cid is None:
            return state, []
        upper = through_seq if through_seq is not None else 2**62
        rows = conn.execute(
            f"SELECT {_TURN_COLS} FROM turns WHERE channel_id = ? AND seq > ? AND seq <= ? "
            "ORDER BY seq DESC LIMIT ?",
            (cid, state.folded_through, upper, limit),
        ).fetchall()
        return state, [_turn(key, r) for r in reversed(rows)]

    async def snapshot(
        self, key: ChannelKey, *, limit: int, facts_limit: int = 500, through_seq: int | None = None
    ) -> tuple[SummaryState, list[Turn]]:
        """State plus the newest ``limit`` unfolded turns up to ``through_seq``, consistently."""
        out: tuple[SummaryState, list[Turn]] = await self._read(
            self._snapshot_sync, key, limit, facts_limit, through_seq
        )
        return out

    async def _channel_rows(
        self,
        key: ChannelKey,
        sql: str,
        args: Callable[[Sequence[Any]], tuple[Any, ...]],
        make: Callable[[ChannelKey, Sequence[Any]], _Row],
    ) -> list[_Row]:
        """One channel's rows of ``sql`` (``args`` gets the channel header), mapped by
        ``make``; an unknown channel has none."""

        def run(conn: sqlite3.Connection) -> list[_Row]:
            h = self._header(conn, key)
            if h is None:
                return []
            return [make(key, r) for r in conn.execute(sql, args(h)).fetchall()]

        out: list[_Row] = await self._read(run)
        return out

    async def pending(self, key: ChannelKey, *, limit: int | None = None) -> list[Turn]:
        """Unfolded turns, oldest first (at most ``limit``)."""
        return await self._channel_rows(
            key,
            f"SELECT {_TURN_COLS} FROM turns WHERE channel_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            lambda h: (h[0], h[3], -1 if limit is None else limit),
            _turn,
        )

    async def pending_size(self, key: ChannelKey) -> tuple[int, int]:
        """(count, tokens) of unfolded turns."""

        def run(conn: sqlite3.Connection) -> tuple[int, int]:
            h = self._header(conn, key)
            if h is None:
                return 0, 0
            n, tok = conn.execute(
                "SELECT count(*), coalesce(sum(tokens), 0) FROM turns "
                "WHERE channel_id = ? AND seq > ?",
                (h[0], h[3]),
            ).fetchone()
            return int(n), int(tok)

        out: tuple[int, int] = await self._read(run)
        return out

    async def stats(self, key: ChannelKey) -> ChannelStats:
        """Counts for ``/summary``: stored, folded and pending turns, facts, compactions."""

        def run(conn: sqlite3.Connection) -> ChannelStats:
            h = self._header(conn, key)
            if h is None:
                return ChannelStats(key, 0, 0, 0, 0, 0, 0, 0, None, 0)
            cid, folded_through = h[0], h[3]
            total, pend, ptok = conn.execute(
                "SELECT count(*), coalesce(sum(seq > ?), 0), "
                "coalesce(sum(CASE WHEN seq > ? THEN tokens ELSE 0 END), 0) "
                "FROM turns WHERE channel_id = ?",
                (folded_through, folded_through, cid),
            ).fetchone()
            (facts,) = conn.execute(
                "SELECT count(*) FROM facts WHERE channel_id = ?", (cid,)
            ).fetchone()
            return ChannelStats(
                key,
                int(total),
                int(total) - int(pend),
                int(pend),
                int(ptok),
                0,
                int(facts),
                int(h[5]),
                h[4],
                int(h[2]),
            )

        out: ChannelStats = await self._read(run)
        return out

    async def turns(self, key: ChannelKey, *, after_seq: int = 0, limit: int = 1000) -> list[Turn]:
        """Stored turns after ``after_seq`` (folded or not), oldest first."""
        return await self._channel_rows(
            key,
            f"SELECT {_TURN_COLS} FROM turns WHERE channel_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            lambda h: (h[0], after_seq, limit),
            _turn,
        )

    async def channels(self) -> list[ChannelKey]:
        """Every channel the store has a row for."""

        def run(conn: sqlite3.Connection) -> list[ChannelKey]:
            rows = conn.execute(
                "SELECT platform, workspace, channel FROM channels ORDER BY id"
            ).fetchall()
            return [ChannelKey(*r) for r in rows]

        out: list[ChannelKey] = await self._read(run)
        return out
