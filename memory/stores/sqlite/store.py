"""``SqliteStore``: the default store, one SQLite file in WAL mode, on aiosqlite.

Why it looks the way it does:

* **Group commit** (``writer``): every write goes through one queue to one writer
  connection and is acknowledged only after the COMMIT that contains it.
* **Reads on other connections** (``readers``: two by default, so a view's independent
  reads run at once). WAL lets a reader see the last committed state while the writer
  works; each read runs in one read transaction, so summary, fold pointer and turns are
  mutually consistent.
* **WAL checkpoints on their own connection** (``checkpointer``), never inside a COMMIT.
* Parameterized SQL only, in ``queries`` and ``archive``; the schema lives in ``schema``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Concatenate, Literal, ParamSpec, TypeVar

import aiosqlite

from memory.errors import StoreError, StoreOpenError
from memory.history import DEFAULT_SUMMARY_HISTORY, ChannelOverview, SummaryVersion
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    ChannelStats,
    Episode,
    LongTermFact,
    NewEpisode,
    NewLongTermFact,
    NewTurn,
    Recall,
    RecordResult,
    SummaryState,
    Turn,
)
from memory.store import ChangeOutcome, ResetResult
from memory.stores.common import TurnEdit, positive_ttl, wants_search
from memory.stores.sqlite import archive, history, queries, turn_search
from memory.stores.sqlite.archive_vocab import ArchiveVocab
from memory.stores.sqlite.catchup import last_turn_by, turns_between
from memory.stores.sqlite.checkpointer import CHECKPOINT_INTERVAL, Checkpointer
from memory.stores.sqlite.embeddings import SqliteEmbeddings
from memory.stores.sqlite.queries import RecordHook, ResetHook
from memory.stores.sqlite.readers import Readers
from memory.stores.sqlite.schema import migrate
from memory.stores.sqlite.term_counts import TermCounts
from memory.stores.sqlite.writer import GroupCommitWriter, WriteTx, raw_connection, translate

__all__ = ["SqliteStore"]

log = logging.getLogger(__name__)

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
P = ParamSpec("P")
T = TypeVar("T")


async def _connect(path: Path | str) -> aiosqlite.Connection:
    """``aiosqlite.connect``; on failure, wait until its worker thread has ended.

    When the connect fails, aiosqlite queues the thread's stop without waiting for it; the
    thread then reports the stop to the event loop. A command that exits right after the
    failed open (an unwritable database) had closed that loop by then, and the thread died
    with an "Event loop is closed" traceback. Joining it here, while the loop runs, ends it
    cleanly.
    """
    conn = aiosqlite.connect(path, isolation_level=None)
    try:
        return await conn
    except BaseException:
        thread = getattr(conn, "_thread", None)
        if thread is not None and thread.is_alive():
            with contextlib.suppress(BaseException):
                await asyncio.to_thread(thread.join, 10)
        raise


def _open_error(path: Path, exc: sqlite3.DatabaseError) -> StoreOpenError:
    """A ``StoreOpenError`` that says what to fix about the file."""
    msg = str(exc)
    if "not a database" in msg or "malformed" in msg:
        hint = "it is not a SQLite database or it is corrupt; move it aside or restore it"
    elif "readonly" in msg or "unable to open" in msg:
        hint = "the file or its folder is not writable; fix permissions or DATABASE_URL"
    else:
        hint = msg
    return StoreOpenError(f"cannot open the database {path}: {hint}")


class SqliteStore(SqliteEmbeddings):
    """A store on one SQLite file (every role of ``memory.store.Store``). See the module
    docstring for the design. Turn vectors (``SqliteEmbeddings``) are memory's own role.

    Stores of other roles share its writer and readers (``write``, ``read``) and add their
    own writes to a created turn's or a reset's transaction (``on_record``, ``on_reset``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        synchronous: Synchronous = "FULL",
        batch_size: int = 512,
        summary_history: int = DEFAULT_SUMMARY_HISTORY,
        readers: int = 2,
        checkpoint_interval: float = CHECKPOINT_INTERVAL,
    ) -> None:
        self.path = Path(path)
        self.summary_history = summary_history
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous
        self.batch_size = batch_size
        self._w: aiosqlite.Connection | None = None
        self._readers = Readers()
        self.reader_count = max(1, readers)
        self._writer: GroupCommitWriter | None = None
        self.checkpointer = Checkpointer(checkpoint_interval)
        """WAL checkpoints off the commit path (``checkpointer``); unused in memory."""
        self.term_counts = TermCounts()
        """Common terms' turn counts, kept between turn searches (``term_counts``)."""
        self.archive_vocab = ArchiveVocab()
        """Archive term counts, kept until the archive is written (``archive_vocab``)."""
        self.on_record: list[RecordHook] = []
        """Run in the transaction of a created turn that has an ``extra``."""
        self.on_reset: list[ResetHook] = []
        """Run in the transaction of every ``reset``."""

    @property
    def _r(self) -> aiosqlite.Connection | None:
        """The first reader (the writer's connection in memory): sequential reads run
        there; None while closed."""
        return self._readers.first

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Open both connections, set WAL, migrate; explain what to fix on failure."""
        in_memory = str(self.path) == ":memory:"
        if not in_memory and not self.path.parent.exists():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreOpenError(
                    f"cannot create the folder for the database {self.path}: {e.strerror}; "
                    "set DATABASE_URL to a writable location"
                ) from e
        busy = f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}"
        try:
            self._w = await _connect(self.path)
            await self._w.execute(busy)
            mode = await self._w.execute_fetchall("PRAGMA journal_mode = WAL")
            if str(next(iter(mode))[0]).lower() != "wal":
                log.warning("SQLite refused WAL mode for %s; using %s", self.path, mode)
            await self._w.execute(f"PRAGMA synchronous = {self.synchronous}")
            await self._w.execute("PRAGMA foreign_keys = ON")
            await self._register(self._w)  # the turns triggers call it; the migration too
            await self._w._execute(  # type: ignore[no-untyped-call]
                lambda: self._migrate(raw_connection(self._w))
            )
            if in_memory:
                # A second connection would open a second, empty database. The writer's
                # thread runs each batch whole, so reads on it still see committed state.
                self._readers.add(self._w)
            else:
                for _ in range(self.reader_count):
                    reader = await _connect(self.path)
                    self._readers.add(reader)
                    await reader.execute(busy)
                    await reader.execute("PRAGMA query_only = 1")
                    await self._register(reader)
                await self._w.execute("PRAGMA wal_autocheckpoint = 0")  # see checkpointer
                await self.checkpointer.start(lambda: self._connected(busy))
        except BaseException as e:
            await self.close()
            if not isinstance(e, sqlite3.DatabaseError):
                raise
            raise _open_error(self.path, e) from e
        self._writer = GroupCommitWriter(self._w, batch_size=self.batch_size,
                                         before_commit=turn_search.drain,
                                         after_commit=self.checkpointer.written)
        self._writer.start()

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        """Migrate, then index turns another tool queued (in one transaction)."""
        migrate(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            turn_search.drain(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    async def _connected(self, *pragmas: str) -> aiosqlite.Connection:
        conn = await _connect(self.path)
        for pragma in pragmas:
            await conn.execute(pragma)
        return conn

    @staticmethod
    async def _register(conn: aiosqlite.Connection) -> None:
        await conn._execute(  # type: ignore[no-untyped-call]
            lambda: turn_search.register(raw_connection(conn))
        )

    async def close(self) -> None:
        """Let queued writes finish, then close both connections. Idempotent."""
        if self._writer is not None:
            await self._writer.close()
            self._writer = None
        await self.checkpointer.close()
        for conn in (self._w, *(r for r in self._readers.take() if r is not self._w)):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
        self._w = None

    async def __aenter__(self) -> SqliteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _write(
        self, fn: Callable[Concatenate[WriteTx, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        if self._writer is None:
            raise StoreError("the store is closed")
        return await self._writer.run(fn, *args, **kwargs)

    async def write(
        self, fn: Callable[Concatenate[WriteTx, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``fn(tx, ...)`` in the writer's next batch; returns after its COMMIT."""
        return await self._write(fn, *args, **kwargs)

    async def read(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(conn, ...)`` in one read transaction on a reader connection."""
        return await self._read(fn, *args, **kwargs)

    async def _read(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(conn, ...)`` in one read transaction on a reader connection."""
        if self._r is None:
            raise StoreError("the store is closed")

        def in_read_tx(reader: sqlite3.Connection) -> T:
            reader.execute("BEGIN")
            try:
                return fn(reader, *args, **kwargs)
            finally:
                reader.execute("COMMIT")

        try:
            return await self._readers.run(in_read_tx)
        except sqlite3.Error as e:
            raise translate(e) from e

    # ------------------------------------------------------------------ memory

    async def record(self, turn: NewTurn) -> RecordResult:
        """Store ``turn`` durably, or return the existing turn with its message id."""
        return await self._write(queries.record, turn, tuple(self.on_record))

    async def commit_summary(
        self,
        key: ChannelKey,
        *,
        expected_version: int,
        text: str,
        folded_through: int,
        facts: Sequence[CarriedIdentifier],
        now: float,
        episode: NewEpisode | None = None,
        channel_facts: Sequence[NewLongTermFact] = (),
        amended: Sequence[int] = (),
    ) -> bool:
        """Atomically install a summary if the channel's version is still ``expected_version``,
        with the episode and facts of this compaction (all or nothing)."""
        return await self._write(
            queries.commit_summary, key, expected_version, text, folded_through, tuple(facts),
            now, episode, tuple(channel_facts), self.summary_history, tuple(amended),
        )

    async def edit_summary(
        self, key: ChannelKey, *, expected_version: int, text: str, now: float, author: str = ""
    ) -> bool:
        """Replace the summary text if the version is unchanged (a new history version)."""
        return await self._write(
            history.edit_summary, key, expected_version, text, now, author, self.summary_history
        )

    async def summary_history_of(self, key: ChannelKey, *, limit: int = 50
                                 ) -> list[SummaryVersion]:
        """The channel's kept summary versions, newest first."""
        return await self._read(history.history, key, limit)

    async def channel_overview(self) -> list[ChannelOverview]:
        """Counts of every channel (the inspector's list, the compaction-lag gauges)."""
        return await self._read(history.overview)

    async def replace_history(self, key: ChannelKey, versions: Sequence[SummaryVersion]) -> None:
        """Set the channel's summary history to copies of ``versions`` (``copy-db``)."""
        await self._write(history.replace, key, tuple(versions))

    async def edit(self, key: ChannelKey, message_id: str, text: str, tokens: int) -> ChangeOutcome:
        """Replace an unfolded turn's text; a folded turn is left as summarized."""
        return await self._write(queries.change, key, message_id, TurnEdit(text, tokens))

    async def amend(self, key: ChannelKey, message_id: str, text: str, tokens: int
                    ) -> ChangeOutcome:
        """Complete a turn's text, folded or not (a folded one is queued for the summary)."""
        return await self._write(queries.amend, key, message_id, TurnEdit(text, tokens))

    async def amended(self, key: ChannelKey, *, limit: int = 50) -> list[Turn]:
        """Folded turns amended since, not yet folded in again; oldest first."""
        return await self._read(queries.amended, key, limit)

    async def delete(self, key: ChannelKey, message_id: str) -> ChangeOutcome:
        """Remove an unfolded turn; a folded turn stays represented in the summary."""
        return await self._write(queries.change, key, message_id, None)

    async def reset(self, key: ChannelKey) -> ResetResult:
        """Forget the channel: turns, summary and facts."""
        result = await self._write(queries.reset, key, tuple(self.on_reset))
        self.term_counts.clear()
        return result

    async def purge_folded_before(self, cutoff: float) -> int:
        """Retention: delete folded turns and episodes older than ``cutoff``; unfolded turns
        and channel facts are kept."""
        return await self._write(queries.purge, cutoff)

    async def state(self, key: ChannelKey, *, facts_limit: int = 500) -> SummaryState:
        """The committed state; an unknown channel is an empty state at version 0."""
        state, _ = await self._read(queries.summary_state, key, facts_limit)
        return state

    async def snapshot(
        self, key: ChannelKey, *, limit: int, facts_limit: int = 500, through_seq: int | None = None
    ) -> tuple[SummaryState, list[Turn]]:
        """State plus the newest ``limit`` unfolded turns up to ``through_seq``, consistently."""
        return await self._read(queries.snapshot, key, limit, facts_limit, through_seq)

    async def pending(self, key: ChannelKey, *, limit: int | None = None) -> list[Turn]:
        """Unfolded turns, oldest first (at most ``limit``)."""
        return await self._read(queries.pending, key, limit)

    async def pending_size(self, key: ChannelKey) -> tuple[int, int]:
        """(count, tokens) of unfolded turns."""
        return await self._read(queries.pending_size, key)

    async def stats(self, key: ChannelKey) -> ChannelStats:
        """Counts for ``/summary``: stored, folded and pending turns, facts, compactions."""
        return await self._read(queries.stats, key)

    async def turns(self, key: ChannelKey, *, after_seq: int = 0, limit: int = 1000) -> list[Turn]:
        """Stored turns after ``after_seq`` (folded or not), oldest first."""
        return await self._read(queries.turns, key, after_seq, limit)

    async def turns_with_ids(self, key: ChannelKey, message_ids: Sequence[str]) -> list[Turn]:
        """Stored turns with these message ids, by seq ascending (unknown ones skipped)."""
        return await self._read(queries.turns_with_ids, key, tuple(message_ids))

    async def channels(self) -> list[ChannelKey]:
        """Every channel the store has a row for."""
        return await self._read(queries.channels)

    async def newest_message_ids(self, key: ChannelKey, *, limit: int = 20) -> list[str]:
        """Message ids of the newest ``limit`` user turns, newest seq first."""
        return await self._read(queries.newest_message_ids, key, limit)

    async def turns_between(
        self, key: ChannelKey, start: float, end: float, *, limit: int = 50_000
    ) -> list[Turn]:
        """Stored turns sent in ``[start, end)``, oldest first (see ``CatchupStore``)."""
        return await self._read(turns_between, key, start, end, limit)

    async def last_turn_by(self, key: ChannelKey, author_id: str, before: float) -> Turn | None:
        """The newest user turn of ``author_id`` before ``before``."""
        return await self._read(last_turn_by, key, author_id, before)

    # ------------------------------------------------------------------ archive

    async def add_fact(self, key: ChannelKey, fact: NewLongTermFact, *, now: float) -> LongTermFact:
        """Store one fact (``/remember``); creates the channel if needed."""
        return await self._write(archive.add_fact, key, fact, now)

    async def delete_fact(self, key: ChannelKey, fact_id: int) -> LongTermFact | None:
        """Delete one fact of this channel; None if the channel has no such fact."""
        return await self._write(archive.delete_fact, key, fact_id)

    async def list_facts(
        self, key: ChannelKey, *, include_superseded: bool = True, limit: int = 200
    ) -> list[LongTermFact]:
        """The channel's facts, newest first."""
        return await self._read(archive.list_facts, key, include_superseded, limit)

    async def episodes(self, key: ChannelKey, *, limit: int = 20) -> list[Episode]:
        """The channel's newest episodes, newest first."""
        return await self._read(archive.episodes, key, limit)

    async def search(
        self,
        key: ChannelKey,
        query: Sequence[str],
        *,
        facts_limit: int = 8,
        episodes_limit: int = 4,
        include_superseded: bool = True,
    ) -> Recall:
        """FTS5 BM25 over this channel's facts and episodes (see ``ArchiveStore.search``)."""
        if not wants_search(query, facts_limit, episodes_limit):
            return Recall()
        return await self._read(archive.search, key, query, facts_limit, episodes_limit,
                                include_superseded, self.archive_vocab)

    async def search_turns(
        self, key: ChannelKey, query: Sequence[str], *, before_seq: int, limit: int = 40,
        fallback: Sequence[str] | None = None, max_docs: int | None = None,
    ) -> list[Turn]:
        """FTS5 BM25 over this channel's stored turns (see ``ArchiveStore.search_turns``)."""
        return await self._read(turn_search.search_turns, key, tuple(query), before_seq, limit,
                                None if fallback is None else tuple(fallback),
                                self.term_counts, max_docs)

    async def turns_at(self, key: ChannelKey, seqs: Sequence[int]) -> list[Turn]:
        """The channel's stored turns with these seqs, ascending (unknown ones skipped)."""
        return await self._read(turn_search.turns_at, key, tuple(seqs))

    # ------------------------------------------------------------------ leases

    async def try_lease(self, key: ChannelKey, owner: str, ttl: float) -> bool:
        """Take or renew the channel's compaction lease (see ``LeaseStore.try_lease``)."""
        return await self._write(queries.lease, key, owner, positive_ttl(ttl))

    async def release_lease(self, key: ChannelKey, owner: str) -> bool:
        """Give the lease back if ``owner`` holds it."""
        return await self._write(queries.lease, key, owner, None)

    # ------------------------------------------------------------------ copy-db

    async def import_turns(self, key: ChannelKey, turns: Sequence[Turn]) -> int:
        """Copy turns in with their seqs; idempotent (see ``PortingStore.import_turns``)."""
        return await self._write(queries.import_turns, key, tuple(turns))

    async def import_state(self, state: SummaryState) -> None:
        """Set a channel's summary state exactly (see ``PortingStore.import_state``)."""
        await self._write(queries.import_state, state)

    async def replace_archive(
        self, key: ChannelKey, episodes: Sequence[Episode], facts: Sequence[LongTermFact]
    ) -> None:
        """Set the channel's episodes and long-term facts to copies (see the protocol)."""
        await self._write(archive.replace_archive, key, tuple(episodes), tuple(facts))
