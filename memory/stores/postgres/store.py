"""``PostgresStore``: the store for replicas sharing one PostgreSQL, on asyncpg.

Same semantics as ``SqliteStore`` (one contract suite runs on both), kept under concurrency:

* **Per-channel seq**: the channel row's ``next_seq`` (``UPDATE … RETURNING``) in the turn's
  own transaction; the row lock orders records in one channel only. A redelivered message
  id is answered from the existing row and burns no seq.
* **Edit, delete and reset lock the channel row first**, ordering them against
  ``commit_summary``'s conditional ``UPDATE … WHERE version = …``.
* **Views** (``state``, ``snapshot``) read one ``REPEATABLE READ READ ONLY`` transaction.
* **A lost connection is retried with backoff** on a fresh pooled connection (asyncpg's
  ``InternalClientError`` "cannot switch to state …" included; ``errors.LOST``); each
  operation is one transaction, so nothing half-applies. If the link died just after
  COMMIT, ``record`` answers ``created=False`` and ``commit_summary`` False (the next
  compaction re-reads).
* ``schema`` is the connection's startup ``search_path``; ``open`` creates it if missing.

For replicas: ``try_lease`` / ``release_lease`` (per-channel compaction single-flight with
expiry).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import asyncpg

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
from memory.stores.common import (
    StatsRow,
    TurnEdit,
    TurnRow,
    positive_ttl,
    wants_search,
)
from memory.stores.faults import REPORT
from memory.stores.postgres import archive, catchup, errors, history, queries, turn_search
from memory.stores.postgres.embeddings import PostgresEmbeddings
from memory.stores.postgres.queries import Conn, RecordHook, ResetHook, by_key
from memory.stores.postgres.schema import migrate, quote_schema

__all__ = ["PostgresStore"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class PostgresStore(PostgresEmbeddings):
    """A store on a PostgreSQL schema (every role of ``memory.store.Store``); see the module
    docstring for the design. Turn vectors (``PostgresEmbeddings``) are memory's own role.

    Stores of other roles share its pool (``tx``, ``fetch``) and add their own writes to a
    created turn's or a reset's transaction (``on_record``, ``on_reset``).
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str = "public",
        connect_timeout: float = 10.0,
        application_name: str = "gistbot",
        summary_history: int = DEFAULT_SUMMARY_HISTORY,
    ) -> None:
        self.summary_history = summary_history
        quote_schema(schema)  # fail early on a bad name
        self.dsn, self.schema, self.min_size, self.max_size = dsn, schema, min_size, max_size
        self.connect_timeout, self.application_name = connect_timeout, application_name
        self._pool: Any = None
        self._order = weakref.WeakValueDictionary[ChannelKey, asyncio.Lock]()
        self.on_record: list[RecordHook] = []
        """Run in the transaction of a created turn that has an ``extra``."""
        self.on_reset: list[ResetHook] = []
        """Run in the transaction of every ``reset``."""

    async def open(self) -> None:
        """Create the pool and migrate; raise ``StoreOpenError`` saying what to fix."""
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=self.min_size,
                max_size=self.max_size,
                timeout=self.connect_timeout,
                server_settings={
                    "search_path": quote_schema(self.schema),
                    "application_name": self.application_name,
                },
            )
            async with self._pool.acquire() as conn:
                await migrate(conn, self.schema)
                indexed = await turn_search.backfill(conn)
            if indexed:
                log.info("indexed %d stored turns for search", indexed)
        except BaseException as e:
            await self.close()
            if isinstance(e, StoreOpenError) or not isinstance(e, errors.OPEN_FAILURES):
                raise
            raise errors.open_error(self.dsn, e) from e

    async def close(self) -> None:
        """Close the pool (waiting for operations in flight). Idempotent."""
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await pool.close()
            except Exception:  # a dead server must not make shutdown fail
                pool.terminate()

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        """Run ``fn`` on a pooled connection; after a lost connection, retry on a fresh one
        with backoff (``errors.RETRY_DELAYS``), then raise ``StoreUnavailableError``."""
        delays = iter(errors.RETRY_DELAYS)
        while True:
            if self._pool is None:
                raise StoreError("the store is closed")
            try:
                async with self._pool.acquire() as conn:
                    try:
                        result = await fn(conn)
                    except errors.LOST:
                        conn.terminate()  # never hand a half-dead connection back to the pool
                        raise
                if REPORT.active:
                    REPORT.succeeded()
                return result
            except errors.LOST as e:
                delay = next(delays, None)
                if delay is None:
                    raise errors.lost(e) from e
                log.warning("PostgreSQL connection lost (%s); retrying in %.2f s",
                            type(e).__name__, delay)
                await asyncio.sleep(delay)
            except asyncpg.PostgresError as e:
                raise errors.translate(e) from e

    async def _tx(self, fn: Callable[[Conn], Awaitable[T]], *, read: bool = False) -> T:
        """``fn`` in one transaction; a read is one consistent REPEATABLE READ snapshot."""

        async def run(conn: Conn) -> T:
            opts = {"isolation": "repeatable_read", "readonly": True} if read else {}
            async with conn.transaction(**opts):
                return await fn(conn)

        return await self._run(run)

    async def tx(self, fn: Callable[[Conn], Awaitable[T]], *, read: bool = False) -> T:
        """``fn(conn)`` in one transaction on a pooled connection, retried like every
        operation of this store after a lost connection."""
        return await self._tx(fn, read=read)

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        """The rows of one statement (its own transaction), retried like ``tx``."""
        return await self._fetch(sql, *args)

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        async def run(conn: Conn) -> list[Any]:
            return list(await conn.fetch(sql, *args))

        return await self._run(run)

    # ------------------------------------------------------------------ memory

    async def record(self, turn: NewTurn) -> RecordResult:
        """Store ``turn`` durably, or return the existing turn with its message id."""
        # One record per channel at a time from this process (FIFO lock): seqs follow arrival.
        async with self._order.setdefault(turn.key, asyncio.Lock()):
            return await self._run(partial(queries.record, turn=turn,
                                           hooks=tuple(self.on_record)))

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
        return await self._tx(partial(
            history.commit_with_history, key=key, keep=self.summary_history,
            expected_version=expected_version, text=text,
            folded_through=folded_through, facts=tuple(facts), now=now, episode=episode,
            channel_facts=channel_facts, amended=tuple(amended),
        ))

    async def edit_summary(
        self, key: ChannelKey, *, expected_version: int, text: str, now: float, author: str = ""
    ) -> bool:
        """Replace the summary text if the version is unchanged (a new history version)."""
        return await self._tx(partial(
            history.edit_summary, key=key, expected_version=expected_version, text=text,
            now=now, author=author, keep=self.summary_history,
        ))

    async def summary_history_of(self, key: ChannelKey, *, limit: int = 50
                                 ) -> list[SummaryVersion]:
        """The channel's kept summary versions, newest first."""
        return await self._tx(partial(history.history, key=key, limit=limit), read=True)

    async def channel_overview(self) -> list[ChannelOverview]:
        """Counts of every channel (the inspector's list, the compaction-lag gauges)."""
        return await self._tx(history.overview, read=True)

    async def replace_history(self, key: ChannelKey, versions: Sequence[SummaryVersion]) -> None:
        """Set the channel's summary history to copies of ``versions`` (``copy-db``)."""
        await self._tx(partial(history.replace, key=key, versions=tuple(versions)))

    async def edit(self, key: ChannelKey, message_id: str, text: str, tokens: int) -> ChangeOutcome:
        """Replace an unfolded turn's text; a folded turn is left as summarized."""
        edit = TurnEdit(text, tokens)
        return await self._tx(partial(queries.change, key=key, message_id=message_id, edit=edit))

    async def amend(self, key: ChannelKey, message_id: str, text: str, tokens: int
                    ) -> ChangeOutcome:
        """Complete a turn's text, folded or not (a folded one is queued for the summary)."""
        edit = TurnEdit(text, tokens)
        return await self._tx(partial(queries.amend, key=key, message_id=message_id, edit=edit))

    async def amended(self, key: ChannelKey, *, limit: int = 50) -> list[Turn]:
        """Folded turns amended since, not yet folded in again; oldest first."""
        rows = await self._fetch(queries.AMENDED, *by_key(key), limit)
        return [TurnRow(*r).turn(key) for r in rows]

    async def delete(self, key: ChannelKey, message_id: str) -> ChangeOutcome:
        """Remove an unfolded turn; a folded turn stays represented in the summary."""
        return await self._tx(partial(queries.change, key=key, message_id=message_id, edit=None))

    async def reset(self, key: ChannelKey) -> ResetResult:
        """Forget the channel: turns, summary and facts (the row and its seq counter stay)."""
        return await self._tx(partial(queries.reset, key=key, hooks=tuple(self.on_reset)))

    async def purge_folded_before(self, cutoff: float) -> int:
        """Retention: delete folded turns and episodes older than ``cutoff`` (and expired
        event claims); channel facts are kept."""
        return await self._tx(partial(queries.purge, cutoff=cutoff))

    async def state(self, key: ChannelKey, *, facts_limit: int = 500) -> SummaryState:
        """The committed state; an unknown channel is an empty state at version 0."""
        read = partial(queries.summary_state, key=key, facts_limit=facts_limit)
        state, _ = await self._tx(read, read=True)
        return state

    async def snapshot(
        self, key: ChannelKey, *, limit: int, facts_limit: int = 500, through_seq: int | None = None
    ) -> tuple[SummaryState, list[Turn]]:
        """State plus the newest ``limit`` unfolded turns up to ``through_seq``, consistently."""
        return await self._tx(partial(
            queries.snapshot, key=key, limit=limit, facts_limit=facts_limit,
            through_seq=through_seq,
        ), read=True)

    async def pending(self, key: ChannelKey, *, limit: int | None = None) -> list[Turn]:
        """Unfolded turns, oldest first (at most ``limit``)."""
        rows = await self._fetch(queries.PENDING, *by_key(key), limit)
        return [TurnRow(*r).turn(key) for r in rows]

    async def pending_size(self, key: ChannelKey) -> tuple[int, int]:
        """(count, tokens) of unfolded turns."""
        ((n, tokens),) = await self._fetch(queries.PENDING_SIZE, *by_key(key))
        return int(n), int(tokens)

    async def stats(self, key: ChannelKey) -> ChannelStats:
        """Counts for ``/summary``: stored, folded and pending turns, facts, compactions."""
        rows = await self._fetch(queries.STATS, *by_key(key))
        return StatsRow(*rows[0]).stats(key) if rows else ChannelStats.empty(key)

    async def turns(self, key: ChannelKey, *, after_seq: int = 0, limit: int = 1000) -> list[Turn]:
        """Stored turns after ``after_seq`` (folded or not), oldest first."""
        rows = await self._fetch(queries.TURNS_AFTER, *by_key(key), after_seq, limit)
        return [TurnRow(*r).turn(key) for r in rows]

    async def turns_with_ids(self, key: ChannelKey, message_ids: Sequence[str]) -> list[Turn]:
        """Stored turns with these message ids, by seq ascending (unknown ones skipped)."""
        if not message_ids:
            return []
        rows = await self._fetch(queries.TURNS_WITH_IDS, *by_key(key), sorted(set(message_ids)))
        return [TurnRow(*r).turn(key) for r in rows]

    async def channels(self) -> list[ChannelKey]:
        """Every channel the store has a row for."""
        return [ChannelKey(*r) for r in await self._fetch(queries.CHANNELS)]

    async def newest_message_ids(self, key: ChannelKey, *, limit: int = 20) -> list[str]:
        """Message ids of the newest ``limit`` user turns, newest seq first."""
        rows = await self._fetch(queries.NEWEST_MESSAGE_IDS, *by_key(key), limit)
        return [str(r[0]) for r in rows]

    async def turns_between(
        self, key: ChannelKey, start: float, end: float, *, limit: int = 50_000
    ) -> list[Turn]:
        """Stored turns sent in ``[start, end)``, oldest first (see ``CatchupStore``)."""
        rows = await self._fetch(catchup.TURNS_BETWEEN, *by_key(key), start, end, limit)
        return [catchup.turn_of(key, r) for r in rows]

    async def last_turn_by(self, key: ChannelKey, author_id: str, before: float) -> Turn | None:
        """The newest user turn of ``author_id`` before ``before``."""
        rows = await self._fetch(catchup.LAST_TURN_BY, *by_key(key), before, author_id)
        return catchup.turn_of(key, rows[0]) if rows else None

    # ------------------------------------------------------------------ archive

    async def add_fact(self, key: ChannelKey, fact: NewLongTermFact, *, now: float) -> LongTermFact:
        """Store one fact (``/remember``); creates the channel if needed."""
        return await self._tx(partial(archive.add_fact, key=key, fact=fact, now=now))

    async def delete_fact(self, key: ChannelKey, fact_id: int) -> LongTermFact | None:
        """Delete one fact of this channel; None if the channel has no such fact."""
        return await self._tx(partial(archive.delete_fact, key=key, fact_id=fact_id))

    async def list_facts(
        self, key: ChannelKey, *, include_superseded: bool = True, limit: int = 200
    ) -> list[LongTermFact]:
        """The channel's facts, newest first."""
        return await self._run(partial(
            archive.list_facts, key=key, include_superseded=include_superseded, limit=limit
        ))

    async def episodes(self, key: ChannelKey, *, limit: int = 20) -> list[Episode]:
        """The channel's newest episodes, newest first."""
        return await self._run(partial(archive.episodes, key=key, limit=limit))

    async def search(
        self,
        key: ChannelKey,
        query: Sequence[str],
        *,
        facts_limit: int = 8,
        episodes_limit: int = 4,
        include_superseded: bool = True,
    ) -> Recall:
        """Full-text search (GIN, ``ts_rank``) over this channel's facts and episodes."""
        if not wants_search(query, facts_limit, episodes_limit):
            return Recall()
        search = partial(
            archive.search, key=key, query=query, facts_limit=facts_limit,
            episodes_limit=episodes_limit, include_superseded=include_superseded,
        )
        return await self._tx(search, read=True)

    async def search_turns(
        self, key: ChannelKey, query: Sequence[str], *, before_seq: int, limit: int = 40,
        fallback: Sequence[str] | None = None, max_docs: int | None = None,
    ) -> list[Turn]:
        """``ts_rank`` over this channel's stored turns (see ``ArchiveStore.search_turns``)."""
        return await self._tx(partial(
            turn_search.search_turns, key=key, query=tuple(query), before_seq=before_seq,
            limit=limit, fallback=None if fallback is None else tuple(fallback),
            max_docs=max_docs,
        ), read=True)

    async def turns_at(self, key: ChannelKey, seqs: Sequence[int]) -> list[Turn]:
        """The channel's stored turns with these seqs, ascending (unknown ones skipped)."""
        return await self._run(partial(turn_search.turns_at, key=key, seqs=tuple(seqs)))

    # ------------------------------------------------------------------ copy-db

    async def import_turns(self, key: ChannelKey, turns: Sequence[Turn]) -> int:
        """Copy turns in with their seqs; idempotent (see ``PortingStore.import_turns``)."""
        return await self._tx(partial(queries.import_turns, key=key, turns=tuple(turns)))

    async def replace_archive(
        self, key: ChannelKey, episodes: Sequence[Episode], facts: Sequence[LongTermFact]
    ) -> None:
        """Set the channel's episodes and long-term facts to copies (see the protocol)."""
        await self._tx(partial(archive.replace_archive, key=key, episodes=episodes, facts=facts))

    async def import_state(self, state: SummaryState) -> None:
        """Set a channel's summary state exactly (see ``PortingStore.import_state``)."""
        await self._tx(partial(queries.import_state, state=state))

    # ------------------------------------------------------------------ leases

    async def try_lease(self, key: ChannelKey, owner: str, ttl: float) -> bool:
        """Take or renew the channel's compaction lease for ``ttl`` seconds (database clock).

        True if ``owner`` now holds it (it was free, expired, or ``owner``'s already). A dead
        replica blocks the channel for at most ``ttl``; a long compaction renews by calling
        again."""
        ttl = positive_ttl(ttl)
        return bool(await self._fetch(queries.TRY_LEASE, *by_key(key), owner, ttl))

    async def release_lease(self, key: ChannelKey, owner: str) -> bool:
        """Give the lease back if ``owner`` holds it; False if it had expired and moved on."""
        return bool(await self._fetch(queries.RELEASE_LEASE, *by_key(key), owner))
