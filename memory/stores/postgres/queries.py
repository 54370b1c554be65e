"""``PostgresStore``'s statements, and the operations on turns and the summary state as
functions on one connection (the store opens the transaction around them).

Column lists come from the row classes of ``memory.stores.common``, so what a statement
selects and how a row is read cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from memory.errors import AnsweredTurnGone
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    NewEpisode,
    NewLongTermFact,
    NewTurn,
    RecordResult,
    SummaryState,
    Turn,
    TurnRef,
)
from memory.store import ChangeOutcome, ResetResult
from memory.stores.common import (
    CHANNEL_FACT_COLS,
    EPISODE_COLS,
    FACT_COLS,
    HEADER_COLS,
    NO_UPPER_SEQ,
    TURN_COLS,
    ChannelHeader,
    FactRow,
    TurnEdit,
    TurnPosition,
    TurnRow,
    applied_change,
    channel_token,
    columns,
    episode_terms,
    fact_terms,
    fact_values,
    recorded,
    refused_change,
    turn_terms,
    with_pending,
)

Conn = Any  # asyncpg ships no type hints

# $1, $2, $3 are always (platform, workspace, channel) when a statement takes a channel key.

_T_COLS = columns(TurnRow._fields, "t.")
_BY_KEY = "platform = $1 AND workspace = $2 AND channel = $3"

FIND_TURN = (
    f"SELECT {_T_COLS} FROM channels c JOIN turns t ON t.channel_id = c.id "
    f"WHERE c.{_BY_KEY.replace(' AND ', ' AND c.')} AND t.message_id = $4"
)
TURNS_WITH_IDS = (
    f"SELECT {_T_COLS} FROM channels c JOIN turns t ON t.channel_id = c.id "
    f"WHERE c.{_BY_KEY.replace(' AND ', ' AND c.')} AND t.message_id = ANY($4::text[]) "
    "ORDER BY t.seq"
)
# Taking the channel row's lock here serializes records in one channel (per-channel seq).
BUMP_SEQ = (
    f"UPDATE channels SET next_seq = next_seq + 1 WHERE {_BY_KEY} "
    "RETURNING id, next_seq - 1, folded_through"
)
CREATE_CHANNEL = (
    "INSERT INTO channels (platform, workspace, channel) VALUES ($1, $2, $3) "
    "ON CONFLICT (platform, workspace, channel) DO NOTHING"
)
_TURN_VALUES = (
    f"INSERT INTO turns (channel_id, {TURN_COLS}, terms) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, to_tsvector('gistbot_stem', $10))"
)  # $10: common.turn_terms(text, author), the turn's search index entry
INSERT_TURN = f"{_TURN_VALUES} ON CONFLICT (channel_id, message_id) DO NOTHING RETURNING seq"
# INSERT_TURN only while the turn answered ($11, $12) is stored, and whether it is: after
# BUMP_SEQ took the channel's lock (which reset and delete take first), this statement's
# snapshot sees every committed reset, and none can start before the commit. (Checked here,
# not in BUMP_SEQ: a WHERE re-checked after waiting for the lock reads other tables as
# they were before the wait.)
INSERT_ANSWER = (
    "WITH answered AS (SELECT 1 FROM turns WHERE channel_id = $1 AND seq = $11 "
    "AND message_id = $12), "
    f"stored AS (INSERT INTO turns (channel_id, {TURN_COLS}, terms) "
    "SELECT $1::bigint, $2::bigint, $3::text, $4::text, $5::text, $6::text, $7::text, "
    "$8::integer, $9::double precision, to_tsvector('gistbot_stem', $10::text) "
    "WHERE EXISTS (SELECT 1 FROM answered) "
    "ON CONFLICT (channel_id, message_id) DO NOTHING RETURNING seq) "
    "SELECT (SELECT seq FROM stored), EXISTS (SELECT 1 FROM answered)"
)
COMMIT_SUMMARY = (
    "UPDATE channels SET summary = $5, folded_through = $6, version = version + 1, "
    "last_compacted_at = $7, compactions = compactions + 1 "
    f"WHERE {_BY_KEY} AND version = $4 AND folded_through <= $6 AND next_seq > $6 RETURNING id"
)
# copy-db: seqs come from the source; re-importing is a no-op, so a copy can resume.
IMPORT_TURN = f"{_TURN_VALUES} ON CONFLICT DO NOTHING"
COUNT_TURNS = "SELECT count(*) FROM turns WHERE channel_id = $1"
IMPORT_NEXT_SEQ = "UPDATE channels SET next_seq = greatest(next_seq, $2) WHERE id = $1"
IMPORT_STATE = (
    "UPDATE channels SET summary = $2, version = $3, folded_through = $4::bigint, "
    "last_compacted_at = $5, compactions = $6, next_seq = greatest(next_seq, $4::bigint + 1) "
    "WHERE id = $1"
)
IMPORT_FACT = f"INSERT INTO facts (channel_id, {FACT_COLS}) VALUES ($1, $2, $3, $4, $5)"
UPSERT_FACT = (
    f"INSERT INTO facts (channel_id, {FACT_COLS}) "
    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (channel_id, value) DO UPDATE SET "
    "context = excluded.context, "
    "first_seq = least(facts.first_seq, excluded.first_seq), "
    "last_seen_seq = greatest(facts.last_seen_seq, excluded.last_seen_seq)"
)
LOCK_CHANNEL = f"SELECT id, folded_through, summary FROM channels WHERE {_BY_KEY} FOR UPDATE"
HEADER = f"SELECT {HEADER_COLS} FROM channels WHERE {_BY_KEY}"
FACTS = (
    f"SELECT {FACT_COLS} FROM facts WHERE channel_id = $1 "
    "ORDER BY last_seen_seq DESC LIMIT $2"
)
NEWEST_UNFOLDED = (
    f"SELECT {TURN_COLS} FROM turns WHERE channel_id = $1 AND seq > $2 AND seq <= $3 "
    "ORDER BY seq DESC LIMIT $4"
)
# LATERAL makes the turns scan a range on (channel_id, seq) from the channel's own pointer.
_LATERAL = (
    "FROM channels c CROSS JOIN LATERAL (SELECT * FROM turns t WHERE t.channel_id = c.id "
    "AND t.seq > {lower} ORDER BY t.seq{limit}) t "
    "WHERE c.platform = $1 AND c.workspace = $2 AND c.channel = $3"
)
PENDING = (
    f"SELECT {_T_COLS} {_LATERAL.format(lower='c.folded_through', limit=' LIMIT $4')} "
    "ORDER BY t.seq"
)
_PENDING_BY_ID = (
    "SELECT count(*), coalesce(sum(tokens), 0) FROM turns WHERE channel_id = $1 AND seq > $2"
)
PENDING_SIZE = (
    "SELECT count(*), coalesce(sum(t.tokens), 0) "
    f"{_LATERAL.format(lower='c.folded_through', limit='')}"
)
TURNS_AFTER = f"SELECT {_T_COLS} {_LATERAL.format(lower='$4', limit=' LIMIT $5')} ORDER BY t.seq"
STATS = (  # in StatsRow's field order
    "SELECT n.total, n.pend, n.ptok, "
    "(SELECT count(*) FROM facts f WHERE f.channel_id = c.id), "
    "c.compactions, c.last_compacted_at, c.version FROM channels c CROSS JOIN LATERAL ("
    "SELECT count(*) AS total, count(*) FILTER (WHERE t.seq > c.folded_through) AS pend, "
    "coalesce(sum(t.tokens) FILTER (WHERE t.seq > c.folded_through), 0) AS ptok "
    f"FROM turns t WHERE t.channel_id = c.id) n WHERE c.{_BY_KEY.replace(' AND ', ' AND c.')}"
)
PURGE = (
    "DELETE FROM turns t USING channels c "
    "WHERE c.id = t.channel_id AND t.sent_at < $1 AND t.seq <= c.folded_through"
)
# A lease is taken when free, expired, or already ours (then it is renewed).
TRY_LEASE = (
    "INSERT INTO leases (platform, workspace, channel, owner, expires_at) "
    "VALUES ($1, $2, $3, $4, clock_timestamp() + $5 * interval '1 second') "
    "ON CONFLICT (platform, workspace, channel) DO UPDATE SET "
    "owner = excluded.owner, expires_at = excluded.expires_at "
    "WHERE leases.expires_at <= clock_timestamp() OR leases.owner = excluded.owner "
    "RETURNING owner"
)
RELEASE_LEASE = f"DELETE FROM leases WHERE {_BY_KEY} AND owner = $4 RETURNING owner"
SEQ_OF = "SELECT seq FROM turns WHERE channel_id = $1 AND message_id = $2"
DELETE_TURN = "DELETE FROM turns WHERE channel_id = $1 AND seq = $2"
EDIT_TURN = (
    "UPDATE turns SET text = $3, tokens = $4, terms = to_tsvector('gistbot_stem', $5) "
    "WHERE channel_id = $1 AND seq = $2"
)
AMEND_TURN = (
    "UPDATE turns SET text = $3, tokens = $4, terms = to_tsvector('gistbot_stem', $5), "
    "amended = $6 WHERE channel_id = $1 AND seq = $2"
)
AMENDED = (  # served by the partial index turns_amended
    f"SELECT {_T_COLS} FROM channels c JOIN turns t ON t.channel_id = c.id "
    f"WHERE c.{_BY_KEY.replace(' AND ', ' AND c.')} AND t.amended "
    "AND t.seq <= c.folded_through ORDER BY t.seq LIMIT $4"
)
UNQUEUE_AMENDED = "UPDATE turns SET amended = false WHERE channel_id = $1 AND seq = ANY($2)"
BUMP_VERSION = "UPDATE channels SET version = version + 1 WHERE id = $1"
AUTHOR_OF = "SELECT author_name FROM turns WHERE channel_id = $1 AND seq = $2"
RESET_TURNS = "DELETE FROM turns WHERE channel_id = $1"
RESET_FACTS = "DELETE FROM facts WHERE channel_id = $1"
# Keeping the row and next_seq means seqs never repeat; the version bump voids compactions.
RESET_CHANNEL = (
    "UPDATE channels SET summary = '', folded_through = next_seq - 1, version = version + 1, "
    "last_compacted_at = NULL, compactions = 0 WHERE id = $1"
)
CHANNELS = "SELECT platform, workspace, channel FROM channels ORDER BY id"
NEWEST_MESSAGE_IDS = (  # from the end of the (channel_id, seq) key, user turns only
    "SELECT t.message_id FROM channels c JOIN turns t ON t.channel_id = c.id "
    "WHERE c.platform = $1 AND c.workspace = $2 AND c.channel = $3 AND t.role = 'user' "
    "ORDER BY t.seq DESC LIMIT $4"
)

# ---------------------------------------------------------------------------- archive
INSERT_EPISODE = (
    "INSERT INTO episodes (channel_id, first_seq, last_seq, started_at, ended_at, speakers, "
    "text, search) VALUES ($1, $2, $3, $4, $5, $6, $7, to_tsvector('simple', $8))"
)
INSERT_CHANNEL_FACT = (
    "INSERT INTO memory_facts (channel_id, text, source_seqs, author, pinned, created_at, "
    "search) VALUES ($1, $2, $3, $4, $5, $6, to_tsvector('simple', $7)) RETURNING id"
)
SUPERSEDE = (
    "UPDATE memory_facts SET superseded_by = $1 WHERE id = $2 AND channel_id = $3 "
    "AND superseded_by IS NULL"
)
DELETE_CHANNEL_FACT = (
    f"DELETE FROM memory_facts WHERE id = $1 AND channel_id = $2 RETURNING {CHANNEL_FACT_COLS}"
)
CHANNEL_ID = f"SELECT id FROM channels WHERE {_BY_KEY}"
LIST_CHANNEL_FACTS = (
    f"SELECT {CHANNEL_FACT_COLS} FROM memory_facts WHERE channel_id = $1 "
    "AND ($2 OR superseded_by IS NULL) ORDER BY id DESC LIMIT $3"
)
LIST_EPISODES = (
    f"SELECT {EPISODE_COLS} FROM episodes WHERE channel_id = $1 ORDER BY id DESC LIMIT $2"
)
SEARCH_CHANNEL_FACTS = (
    f"SELECT {CHANNEL_FACT_COLS} FROM memory_facts, to_tsquery('simple', $2) q "
    "WHERE channel_id = $1 AND search @@ q AND ($4 OR superseded_by IS NULL) "
    "ORDER BY superseded_by IS NOT NULL, ts_rank(search, q) DESC, id DESC LIMIT $3"
)
SEARCH_EPISODES = (
    f"SELECT {EPISODE_COLS} FROM episodes, to_tsquery('simple', $2) q "
    "WHERE channel_id = $1 AND search @@ q ORDER BY ts_rank(search, q) DESC, id DESC LIMIT $3"
)
RESET_EPISODES = "DELETE FROM episodes WHERE channel_id = $1"
RESET_CHANNEL_FACTS = "DELETE FROM memory_facts WHERE channel_id = $1"
PURGE_EPISODES = "DELETE FROM episodes WHERE ended_at < $1"


def count(status: str) -> int:
    """Rows a command touched, from its status ("DELETE 5" -> 5)."""
    return int(status.rsplit(" ", 1)[-1])


def turn_values(cid: int, turn: Turn) -> tuple[Any, ...]:
    """The parameters of ``INSERT_TURN`` / ``IMPORT_TURN`` for ``turn`` of channel ``cid``."""
    return (cid, *TurnRow.of(turn), turn_terms(turn.text, turn.author_name))


def by_key(key: ChannelKey) -> tuple[str, str, str]:
    """The (platform, workspace, channel) parameters ``$1, $2, $3`` of a statement."""
    return key.platform, key.workspace, key.channel


class _Duplicate(Exception):
    """Rolls back the seq ``record`` took when the message id turned out to exist."""


RecordHook = Callable[[Conn, Turn, object], Awaitable[None]]
"""Writes another store adds to a created turn's transaction: ``(conn, stored, turn.extra)``."""
ResetHook = Callable[[Conn, ChannelKey], Awaitable[None]]
"""Writes another store adds to a channel's ``reset`` transaction."""


async def _insert(conn: Conn, cid: int, stored: Turn, answers: TurnRef | None) -> int | None:
    """Insert ``stored`` (its seq; None when its message id exists), only while the turn
    it ``answers`` is stored: ``AnsweredTurnGone`` when not (the transaction rolls back)."""
    if answers is None:
        return cast("int | None", await conn.fetchval(INSERT_TURN, *turn_values(cid, stored)))
    seq, present = await conn.fetchrow(INSERT_ANSWER, *turn_values(cid, stored), answers.seq,
                                       answers.message_id)
    if not present:
        raise AnsweredTurnGone(stored.key, answers)
    return cast("int | None", seq)


async def record(conn: Conn, turn: NewTurn, hooks: Sequence[RecordHook] = ()) -> RecordResult:
    """Store ``turn`` at the channel's next seq, or answer the turn with its message id; a
    created turn with an ``extra`` runs ``hooks`` in the same transaction. A turn that
    ``answers`` one no longer stored raises ``AnsweredTurnGone`` and writes nothing."""
    args = by_key(turn.key)
    while True:
        row = await conn.fetchrow(FIND_TURN, *args, turn.message_id)
        if row is not None:
            return RecordResult(TurnRow(*row).turn(turn.key), created=False)
        try:
            async with conn.transaction():
                bumped = await conn.fetchrow(BUMP_SEQ, *args)
                if bumped is None:
                    await conn.execute(CREATE_CHANNEL, *args)
                    bumped = await conn.fetchrow(BUMP_SEQ, *args)
                cid, seq, folded_through = bumped
                stored, result = recorded(turn, seq, folded_through)
                if await _insert(conn, cid, stored, turn.answers) is None:
                    raise _Duplicate
                if turn.extra is not None:  # e.g. the reply it is owed, in one transaction
                    for hook in hooks:
                        await hook(conn, stored, turn.extra)
                # compaction's check, here rather than in a read of its own afterwards
                size = await conn.fetchrow(_PENDING_BY_ID, cid, folded_through)
        except _Duplicate:  # committed by another writer while we waited: read it
            continue
        return with_pending(result, size)


async def commit_summary(
    conn: Conn, key: ChannelKey, expected_version: int, text: str, folded_through: int,
    facts: Sequence[CarriedIdentifier], now: float, episode: NewEpisode | None,
    channel_facts: Sequence[NewLongTermFact], amended: Sequence[int] = (),
) -> bool:
    """Install the summary if the version is unchanged, with its episode and facts, and
    take the ``amended`` seqs it folded in off the queue."""
    cid = await conn.fetchval(
        COMMIT_SUMMARY, *by_key(key), expected_version, text, folded_through, now
    )
    if cid is None:
        return False
    if facts:
        await conn.executemany(UPSERT_FACT, fact_values(cid, facts))
    if amended:
        await conn.execute(UNQUEUE_AMENDED, cid, list(amended))
    if episode is not None:
        await insert_episode(conn, cid, episode)
    for fact in channel_facts:
        await insert_channel_fact(conn, cid, fact, now)
    return True


async def change(conn: Conn, key: ChannelKey, message_id: str, edit: TurnEdit | None
                 ) -> ChangeOutcome:
    """Edit (or, with None, delete) an unfolded turn; see ``common.refused_change``."""
    locked = await conn.fetchrow(LOCK_CHANNEL, *by_key(key))
    seq = None if locked is None else await conn.fetchval(SEQ_OF, locked["id"], message_id)
    found = None if seq is None else TurnPosition(seq, locked["folded_through"])
    refused = refused_change(found)
    if refused is not None:
        return refused
    cid = locked["id"]
    if edit is None:
        await conn.execute(DELETE_TURN, cid, seq)
    else:
        author = await conn.fetchval(AUTHOR_OF, cid, seq)
        indexed = turn_terms(edit.text, author)
        await conn.execute(EDIT_TURN, cid, seq, edit.text, edit.tokens, indexed)
    await conn.execute(BUMP_VERSION, cid)
    return applied_change(edit)


async def amend(conn: Conn, key: ChannelKey, message_id: str, edit: TurnEdit) -> ChangeOutcome:
    """Set a turn's completed text, folded or not, re-indexed (the trigger drops its
    vectors); a folded turn is queued (``amended``) for the next compaction."""
    locked = await conn.fetchrow(LOCK_CHANNEL, *by_key(key))
    seq = None if locked is None else await conn.fetchval(SEQ_OF, locked["id"], message_id)
    if seq is None:
        return "missing"
    cid = locked["id"]
    folded = seq <= locked["folded_through"]
    author = await conn.fetchval(AUTHOR_OF, cid, seq)
    await conn.execute(AMEND_TURN, cid, seq, edit.text, edit.tokens,
                       turn_terms(edit.text, author), folded)
    await conn.execute(BUMP_VERSION, cid)
    return "amended" if folded else "updated"


async def reset(conn: Conn, key: ChannelKey, hooks: Sequence[ResetHook] = ()) -> ResetResult:
    """Delete the channel's turns, summary, facts and archive; keep its row and seqs; run
    ``hooks`` in the same transaction."""
    locked = await conn.fetchrow(LOCK_CHANNEL, *by_key(key))
    if locked is None:
        return ResetResult(turns=0, had_summary=False, facts=0)
    cid = locked["id"]
    turns = count(await conn.execute(RESET_TURNS, cid))
    facts = count(await conn.execute(RESET_FACTS, cid))
    episodes = count(await conn.execute(RESET_EPISODES, cid))
    channel_facts = count(await conn.execute(RESET_CHANNEL_FACTS, cid))
    for hook in hooks:
        await hook(conn, key)
    await conn.execute("DELETE FROM summary_history WHERE channel_id = $1", cid)
    await conn.execute(RESET_CHANNEL, cid)
    return ResetResult(turns=turns, had_summary=bool(locked["summary"]), facts=facts,
                       episodes=episodes, channel_facts=channel_facts)


async def purge(conn: Conn, cutoff: float) -> int:
    """Retention: old folded turns and old episodes."""
    n = count(await conn.execute(PURGE, cutoff))
    await conn.execute(PURGE_EPISODES, cutoff)
    return n


async def summary_state(
    conn: Conn, key: ChannelKey, facts_limit: int
) -> tuple[SummaryState, int | None]:
    """The committed state and the channel's id (None for an unknown channel)."""
    row = await conn.fetchrow(HEADER, *by_key(key))
    if row is None:
        return SummaryState(key), None
    header = ChannelHeader(*row)
    facts = await conn.fetch(FACTS, header.id, facts_limit)
    return header.state(key, (FactRow(*r).fact() for r in facts)), int(header.id)


async def snapshot(
    conn: Conn, key: ChannelKey, limit: int, facts_limit: int, through_seq: int | None
) -> tuple[SummaryState, list[Turn]]:
    """State plus the newest ``limit`` unfolded turns up to ``through_seq``."""
    state, cid = await summary_state(conn, key, facts_limit)
    if cid is None:
        return state, []
    upper = through_seq if through_seq is not None else NO_UPPER_SEQ
    rows = await conn.fetch(NEWEST_UNFOLDED, cid, state.folded_through, upper, limit)
    return state, [TurnRow(*r).turn(key) for r in reversed(rows)]


async def locked_channel(conn: Conn, key: ChannelKey) -> int:
    """The channel's id, creating its row if needed, locked for this transaction."""
    await conn.execute(CREATE_CHANNEL, *by_key(key))
    return int((await conn.fetchrow(LOCK_CHANNEL, *by_key(key)))["id"])


async def import_turns(conn: Conn, key: ChannelKey, turns: Sequence[Turn]) -> int:
    """Copy turns in with their seqs; existing seqs are kept. Returns how many were new."""
    cid = await locked_channel(conn, key)
    before = await conn.fetchval(COUNT_TURNS, cid)
    await conn.executemany(IMPORT_TURN, [turn_values(cid, t) for t in turns])
    if turns:
        await conn.execute(IMPORT_NEXT_SEQ, cid, max(t.seq for t in turns) + 1)
    after = await conn.fetchval(COUNT_TURNS, cid)
    return int(after - before)


async def import_state(conn: Conn, state: SummaryState) -> None:
    """Set a channel's summary state exactly (copy-db)."""
    s, cid = state, await locked_channel(conn, state.key)
    await conn.execute(IMPORT_STATE, cid, s.text, s.version, s.folded_through,
                       s.last_compacted_at, s.compactions)
    await conn.execute(RESET_FACTS, cid)
    await conn.executemany(IMPORT_FACT, fact_values(cid, s.facts))


async def insert_episode(conn: Conn, cid: int, e: NewEpisode) -> None:
    """Archive one episode of channel ``cid`` with its search vector."""
    search = f"{channel_token(cid)} {episode_terms(e)}"
    await conn.execute(INSERT_EPISODE, cid, e.first_seq, e.last_seq, e.started_at,
                       e.ended_at, list(e.speakers), e.text, search)


async def insert_channel_fact(conn: Conn, cid: int, f: NewLongTermFact, now: float) -> int:
    """Store one long-term fact of channel ``cid``, marking the one it supersedes."""
    search = f"{channel_token(cid)} {fact_terms(f)}"
    fid = int(await conn.fetchval(INSERT_CHANNEL_FACT, cid, f.text, list(f.source_seqs),
                                  f.author, f.pinned, now, search))
    if f.supersedes is not None:
        await conn.execute(SUPERSEDE, fid, f.supersedes, cid)
    return fid
