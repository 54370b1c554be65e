"""``PostgresStore``: the ``Store`` for replicas sharing one PostgreSQL, on asyncpg.

Same semantics as ``SqliteStore`` (one contract suite runs on both), kept under concurrency:

* **Per-channel seq**: the channel row's ``next_seq`` (``UPDATE … RETURNING``) in the turn's
  own transaction; the row lock orders records in one channel only. A redelivered message
  id is answered from the existing row and burns no seq.
* **Edit, delete and reset lock the channel row first**, ordering them against
  ``commit_summary``'s conditional ``UPDATE … WHERE version = …``.
* **Views** (``state``, ``snapshot``) read one ``REPEATABLE READ READ ONLY`` transaction.
* **A lost connection is retried once** on a fresh pooled connection; each operation is one
  transaction, so nothing half-applies. If the link died just after COMMIT, ``record``
  answers ``created=False`` and ``commit_summary`` False (the next compaction re-reads).
* ``schema`` is the connection's startup ``search_path``; ``open`` creates it if missing.

Extras for replicas: ``try_lease`` / ``release_lease`` (per-channel compaction single-flight
with expiry) and ``claim_event`` (event de-duplication).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import asyncpg

from memory import postgres_schema as q
from memory.errors import StoreError, StoreOpenError
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
from memory.store import ChangeOutcome, ResetResult

__all__ = ["PostgresStore"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Conn = Any  # asyncpg ships no type hints


class _Duplicate(Exception):
    """Rolls back the seq ``record`` took when the message id turned out to exist."""


def _k(key: ChannelKey) -> tuple[str, str, str]:
    return key.platform, key.workspace, key.channel


def _turn(key: ChannelKey, r: Sequence[Any]) -> Turn:
    return Turn(key, int(r[0]), r[1], r[2], r[3], r[4], r[5], int(r[6]), float(r[7]))


def _episode(key: ChannelKey, r: Sequence[Any]) -> Episode:
    return Episode(
        key, int(r[0]), int(r[1]), int(r[2]), float(r[3]), float(r[4]), tuple(r[5]), r[6]
    )


def _cfact(key: ChannelKey, r: Sequence[Any]) -> ChannelFact:
    by = None if r[6] is None else int(r[6])
    seqs = tuple(int(x) for x in r[2])
    return ChannelFact(key, int(r[0]), r[1], seqs, r[3], bool(r[4]), float(r[5]), by)


def _tsquery(cid: int, query: Sequence[str]) -> str:
    """``'c<id>' & ('a' | 'b')``; terms are letters and digits only (``search_text``), and
    quotes are doubled anyway, so none is an operator."""
    ors = " | ".join("'" + t.replace("'", "''").replace("\\", "") + "'" for t in query)
    return f"'c{cid}' & ({ors})"


async def _insert_episode(conn: Conn, cid: int, e: NewEpisode) -> None:
    search = f"c{cid} " + terms(" ".join([e.text, *e.speakers]))
    await conn.execute(
        q.INSERT_EPISODE,
        cid,
        e.first_seq,
        e.last_seq,
        e.started_at,
        e.ended_at,
        list(e.speakers),
        e.text,
        search,
    )


async def _insert_cfact(conn: Conn, cid: int, f: NewChannelFact, now: float) -> int:
    fid = int(
        await conn.fetchval(
            q.INSERT_CFACT,
            cid,
            f.text,
            list(f.source_seqs),
            f.author,
            f.pinned,
            now,
            f"c{cid} " + terms(f.text),
        )
    )
    if f.supersedes is not None:
        await conn.execute(q.SUPERSEDE, fid, f.supersedes, cid)
    return fid


class PostgresStore:
    """A ``Store`` on a PostgreSQL schema; see the module docstring for the design."""

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str = "public",
        connect_timeout: float = 10.0,
        application_name: str = "gistbot",
    ) -> None:
        q.quote_schema(schema)  # fail early on a bad name
        self.dsn, self.schema, self.min_size, self.max_size = dsn, schema, min_size, max_size
        self.connect_timeout, self.application_name = connect_timeout, application_name
        self._pool: Any = None
        self._order = weakref.WeakValueDictionary[ChannelKey, asyncio.Lock]()

    async def open(self) -> None:
        """Create the pool and migrate; raise ``StoreOpenError`` saying what to fix."""
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=self.min_size,
                max_size=self.max_size,
                timeout=self.connect_timeout,
                server_settings={
                    "search_path": q.quote_schema(self.schema),
                    "application_name": self.application_name,
                },
            )
            async with self._pool.acquire() as conn:
                await q.migrate(conn, self.schema)
        except BaseException as e:
            await self.close()
            if isinstance(e, StoreOpenError) or not isinstance(e, q.OPEN_FAILURES):
                raise
            raise q.open_error(self.dsn, e) from e

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
        """Run ``fn`` on a pooled connection; retry once on a lost connection."""
        for attempt in (1, 2):
            if self._pool is None:
                raise StoreError("the store is closed")
            try:
                async with self._pool.acquire() as conn:
                    return await fn(conn)
            except q.LOST as e:
                if attempt == 2:
                    raise q.translate(e) from e
                log.warning("PostgreSQL connection lost (%s); retrying once", type(e).__name__)
            except asyncpg.PostgresError as e:
                raise q.translate(e) from e
        raise AssertionError("unreachable")

    async def _tx(self, fn: Callable[[Conn], Awaitable[T]], *, read: bool = False) -> T:
        """``fn`` in one transaction; a read is one consistent REPEATABLE READ snapshot."""

        async def run(conn: Conn) -> T:
            opts = {"isolation": "repeatable_read", "readonly": True} if read else {}
            async with conn.transaction(**opts):
                return await fn(conn)

        return await self._run(run)

    # ------------------------------------------------------------------ writes

    async def record(self, turn: NewTurn) -> RecordResult:
        """Store ``turn`` durably, or return the existing turn with its message id."""
        k, t, args = turn.key, turn, _k(turn.key)  # t: short for the many fields below
        cols = (t.message_id, t.role, t.author_id, t.author_name, t.text, t.tokens, t.sent_at)

        async def run(conn: Conn) -> RecordResult:
            while True:
                row = await conn.fetchrow(q.FIND_TURN, *args, t.message_id)
                if row is not None:
                    return RecordResult(_turn(k, row), created=False)
                try:
                    async with conn.transaction():
                        bumped = await conn.fetchrow(q.BUMP_SEQ, *args)
                        if bumped is None:
                            await conn.execute(q.CREATE_CHANNEL, *args)
                            bumped = await conn.fetchrow(q.BUMP_SEQ, *args)
                        cid, seq, folded_through = bumped
                        if await conn.fetchval(q.INSERT_TURN, cid, seq, *cols) is None:
                            raise _Duplicate
                except _Duplicate:  # committed by another writer while we waited: read it
                    continue
                hint = int(seq) - int(folded_through)
                return RecordResult(Turn(k, int(seq), *cols), created=True, pending_hint=hint)

        # One record per channel at a time from this process (FIFO lock): seqs follow arrival.
        async with self._order.setdefault(k, asyncio.Lock()):
            return await self._run(run)

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
        args, facts = _k(key), tuple(facts)

        async def run(conn: Conn) -> bool:
            cid = await conn.fetchval(
                q.COMMIT_SUMMARY, *args, expected_version, text, folded_through, now
            )
            if cid is None:
                return False
            if facts:
                await conn.executemany(
                    q.UPSERT_FACT,
                    [(cid, f.value, f.context, f.first_seq, f.last_seen_seq) for f in facts],
                )
            if episode is not None:
                await _insert_episode(conn, cid, episode)
            for fact in channel_facts:
                await _insert_cfact(conn, cid, fact, now)
            return True

        return await self._tx(run)

    async def _change(
        self, key: ChannelKey, message_id: str, new: tuple[str, int] | None
    ) -> ChangeOutcome:
        async def run(conn: Conn) -> ChangeOutcome:
            h = await conn.fetchrow(q.LOCK_CHANNEL, *_k(key))
            if h is None:
                return "missing"
            seq = await conn.fetchval(q.SEQ_OF, h["id"], message_id)
            if seq is None:
                return "missing"
            if seq <= h["folded_through"]:
                return "folded"
            if new is None:
                await conn.execute(q.DELETE_TURN, h["id"], seq)
            else:
                await conn.execute(q.EDIT_TURN, h["id"], seq, *new)
            # An in-flight compaction may have read the old text: make its commit fail.
            await conn.execute(q.BUMP_VERSION, h["id"])
            return "deleted" if new is None else "updated"

        return await self._tx(run)

    async def edit(self, key: ChannelKey, message_id: str, text: str, tokens: int) -> ChangeOutcome:
        """Replace an unfolded turn's text; a folded turn is left as summarized."""
        return await self._change(key, message_id, (text, tokens))

    async def delete(self, key: ChannelKey, message_id: str) -> ChangeOutcome:
        """Remove an unfolded turn; a folded turn stays represented in the summary."""
        return await self._change(key, message_id, None)

    async def reset(self, key: ChannelKey) -> ResetResult:
        """Forget the channel: turns, summary and facts (the row and its seq counter stay)."""

        async def run(conn: Conn) -> ResetResult:
            h = await conn.fetchrow(q.LOCK_CHANNEL, *_k(key))
            if h is None:
                return ResetResult(turns=0, had_summary=False, facts=0)
            cid = h["id"]
            turns = q.count(await conn.execute(q.RESET_TURNS, cid))
            facts = q.count(await conn.execute(q.RESET_FACTS, cid))
            episodes = q.count(await conn.execute(q.RESET_EPISODES, cid))
            cfacts = q.count(await conn.execute(q.RESET_CFACTS, cid))
            await conn.execute(q.RESET_CHANNEL, cid)
            return ResetResult(
                turns=turns,
                had_summary=bool(h["summary"]),
                facts=facts,
                episodes=episodes,
                channel_facts=cfacts,
            )

        return await self._tx(run)

    async def purge_folded_before(self, cutoff: float) -> int:
        """Retention: delete folded turns and episodes older than ``cutoff`` (and expired
        event claims); channel facts are kept."""

        async def run(conn: Conn) -> int:
            n = q.count(await conn.execute(q.PURGE, cutoff))
            await conn.execute(q.PURGE_EPISODES, cutoff)
            await conn.execute(q.PURGE_EVENTS)
            return n

        return await self._tx(run)

    # ------------------------------------------------------------------ reads

    async def _state(
        self, conn: Conn, key: ChannelKey, facts_limit: int
    ) -> tuple[SummaryState, int | None]:
        h = await conn.fetchrow(q.HEADER, *_k(key))
        if h is None:
            return SummaryState(key), None
        rows = await conn.fetch(q.FACTS, h["id"], facts_limit)
        facts = tuple(Fact(r[0], r[1], int(r[2]), int(r[3])) for r in rows)
        state = SummaryState(
            key,
            h["summary"],
            int(h["version"]),
            int(h["folded_through"]),
            h["last_compacted_at"],
            int(h["compactions"]),
            facts,
        )
        return state, int(h["id"])

    async def state(self, key: ChannelKey, *, facts_limit: int = 500) -> SummaryState:
        """The committed state; an unknown channel is an empty state at version 0."""

        async def run(conn: Conn) -> SummaryState:
            return (await self._state(conn, key, facts_limit))[0]

        return await self._tx(run, read=True)

    async def snapshot(
        self, key: ChannelKey, *, limit: int, facts_limit: int = 500, through_seq: int | None = None
    ) -> tuple[SummaryState, list[Turn]]:
        """State plus the newest ``limit`` unfolded turns up to ``through_seq``, consistently."""

        async def run(conn: Conn) -> tuple[SummaryState, list[Turn]]:
            state, cid = await self._state(conn, key, facts_limit)
            if cid is None:
                return state, []
            upper = through_seq if through_seq is not None else 2**62
            rows = await conn.fetch(q.NEWEST_UNFOLDED, cid, state.folded_through, upper, limit)
            return state, [_turn(key, r) for r in reversed(rows)]

        return await self._tx(run, read=True)

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        async def run(conn: Conn) -> list[Any]:
            return list(await conn.fetch(sql, *args))

        return await self._run(run)

    async def pending(self, key: ChannelKey, *, limit: int | None = None) -> list[Turn]:
        """Unfolded turns, oldest first (at most ``limit``)."""
        return [_turn(key, r) for r in await self._fetch(q.PENDING, *_k(key), limit)]

    async def pending_size(self, key: ChannelKey) -> tuple[int, int]:
        """(count, tokens) of unfolded turns."""
        (row,) = await self._fetch(q.PENDING_SIZE, *_k(key))
        return int(row[0]), int(row[1])

    async def stats(self, key: ChannelKey) -> ChannelStats:
        """Counts for ``/summary``: stored, folded and pending turns, facts, compactions."""
        rows = await self._fetch(q.STATS, *_k(key))
        return ChannelStats(key, *(rows[0] if rows else (0, 0, 0, 0, 0, 0, 0, None, 0)))

    async def turns(self, key: ChannelKey, *, after_seq: int = 0, limit: int = 1000) -> list[Turn]:
        """Stored turns after ``after_seq`` (folded or not), oldest first."""
        return [_turn(key, r) for r in await self._fetch(q.TURNS_AFTER, *_k(key), after_seq, limit)]

    async def channels(self) -> list[ChannelKey]:
        """Every channel the store has a row for."""
        return [ChannelKey(r[0], r[1], r[2]) for r in await self._fetch(q.CHANNELS)]

    # ------------------------------------------------------------------ archive

    async def add_fact(self, key: ChannelKey, fact: NewChannelFact, *, now: float) -> ChannelFact:
        """Store one fact (``/remember``); creates the channel if needed."""

        async def run(conn: Conn) -> ChannelFact:
            await conn.execute(q.CREATE_CHANNEL, *_k(key))
            cid = int(await conn.fetchval(q.CHANNEL_ID, *_k(key)))
            fid = await _insert_cfact(conn, cid, fact, now)
            return ChannelFact(key, fid, fact.text, fact.source_seqs, fact.author, fact.pinned, now)

        return await self._tx(run)

    async def delete_fact(self, key: ChannelKey, fact_id: int) -> ChannelFact | None:
        """Delete one fact of this channel; None if the channel has no such fact."""

        async def run(conn: Conn) -> ChannelFact | None:
            cid = await conn.fetchval(q.CHANNEL_ID, *_k(key))
            if cid is None:
                return None
            row = await conn.fetchrow(q.DELETE_CFACT, fact_id, cid)
            return None if row is None else _cfact(key, row)

        return await self._tx(run)

    async def list_facts(
        self, key: ChannelKey, *, include_superseded: bool = True, limit: int = 200
    ) -> list[ChannelFact]:
        """The channel's facts, newest first."""

        async def run(conn: Conn) -> list[ChannelFact]:
            cid = await conn.fetchval(q.CHANNEL_ID, *_k(key))
            if cid is None:
                return []
            rows = await conn.fetch(q.LIST_CFACTS, cid, include_superseded, limit)
            return [_cfact(key, r) for r in rows]

        return await self._run(run)

    async def episodes(self, key: ChannelKey, *, limit: int = 20) -> list[Episode]:
        """The channel's newest episodes, newest first."""

        async def run(conn: Conn) -> list[Episode]:
            cid = await conn.fetchval(q.CHANNEL_ID, *_k(key))
            if cid is None:
                return []
            return [_episode(key, r) for r in await conn.fetch(q.LIST_EPISODES, cid, limit)]

        return await self._run(run)

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
        if not query or (facts_limit <= 0 and episodes_limit <= 0):
            return Recall()

        async def run(conn: Conn) -> Recall:
            cid = await conn.fetchval(q.CHANNEL_ID, *_k(key))
            if cid is None:
                return Recall()
            tsq = _tsquery(int(cid), query)
            facts = await conn.fetch(q.SEARCH_CFACTS, cid, tsq, facts_limit, include_superseded)
            episodes = await conn.fetch(q.SEARCH_EPISODES, cid, tsq, episodes_limit)
            return Recall(
                tuple(_cfact(key, r) for r in facts), tuple(_episode(key, r) for r in episodes)
            )

        return await self._tx(run, read=True)

    # ------------------------------------------------------------------ replicas (extra)

    async def _channel(self, conn: Conn, key: ChannelKey) -> int:
        await conn.execute(q.CREATE_CHANNEL, *_k(key))
        return int((await conn.fetchrow(q.LOCK_CHANNEL, *_k(key)))["id"])

    async def import_turns(self, key: ChannelKey, turns: Sequence[Turn]) -> int:
        """Copy turns in with their seqs; idempotent (see ``Store.import_turns``)."""

        async def run(conn: Conn) -> int:
            cid = await self._channel(conn, key)
            before = await conn.fetchval("SELECT count(*) FROM turns WHERE channel_id = $1", cid)
            rows = [
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
                )
                for t in turns
            ]
            await conn.executemany(q.IMPORT_TURN, rows)
            if turns:
                await conn.execute(q.IMPORT_NEXT_SEQ, cid, max(t.seq for t in turns) + 1)
            after = await conn.fetchval("SELECT count(*) FROM turns WHERE channel_id = $1", cid)
            return int(after - before)

        return await self._tx(run)

    async def replace_archive(
        self, key: ChannelKey, episodes: Sequence[Episode], facts: Sequence[ChannelFact]
    ) -> None:
        """Set the channel's episodes and long-term facts to copies (see the protocol)."""

        async def run(conn: Conn) -> None:
            cid = await self._channel(conn, key)
            await conn.execute(q.RESET_EPISODES, cid)
            await conn.execute(q.RESET_CFACTS, cid)
            for e in sorted(episodes, key=lambda e: e.id):
                await _insert_episode(
                    conn,
                    cid,
                    NewEpisode(
                        e.first_seq, e.last_seq, e.started_at, e.ended_at, e.speakers, e.text
                    ),
                )
            copies: dict[int, int] = {}
            for f in sorted(facts, key=lambda f: f.id):
                new = NewChannelFact(f.text, f.source_seqs, f.author, f.pinned)
                copies[f.id] = await _insert_cfact(conn, cid, new, f.created_at)
            for f in facts:
                if f.superseded_by in copies:
                    await conn.execute(q.SUPERSEDE, copies[f.superseded_by], copies[f.id], cid)

        await self._tx(run)

    async def import_state(self, state: SummaryState) -> None:
        """Set a channel's summary state exactly (see ``Store.import_state``)."""
        s = state

        async def run(conn: Conn) -> None:
            cid = await self._channel(conn, s.key)
            await conn.execute(
                q.IMPORT_STATE,
                cid,
                s.text,
                s.version,
                s.folded_through,
                s.last_compacted_at,
                s.compactions,
            )
            await conn.execute(q.RESET_FACTS, cid)
            await conn.executemany(
                q.IMPORT_FACT,
                [(cid, f.value, f.context, f.first_seq, f.last_seen_seq) for f in s.facts],
            )

        await self._tx(run)

    async def try_lease(self, key: ChannelKey, owner: str, ttl: float) -> bool:
        """Take or renew the channel's compaction lease for ``ttl`` seconds (database clock).

        True if ``owner`` now holds it (it was free, expired, or ``owner``'s already). A dead
        replica blocks the channel for at most ``ttl``; a long compaction renews by calling
        again."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        return bool(await self._fetch(q.TRY_LEASE, *_k(key), owner, float(ttl)))

    async def release_lease(self, key: ChannelKey, owner: str) -> bool:
        """Give the lease back if ``owner`` holds it; False if it had expired and moved on."""
        return bool(await self._fetch(q.RELEASE_LEASE, *_k(key), owner))

    async def claim_event(self, event_id: str, ttl: float = 86400) -> bool:
        """True for the first claimer of a platform event id within ``ttl`` seconds: replicas
        receiving one delivery (a Slack retry) call it first, and only the winner handles it.
        Expired claims are purged by ``purge_folded_before``."""
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        return bool(await self._fetch(q.CLAIM_EVENT, event_id, uuid.uuid4().hex, float(ttl)))
