"""``SqliteStore``'s SQL, as plain functions on a ``sqlite3`` connection.

Writes take a ``WriteTx`` (they run inside the writer's batch transaction, under their own
savepoint); reads take a reader connection (``readers``) inside one read transaction.
Every statement is parameterized; table names in f-strings are constants of this module.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from memory.errors import AnsweredTurnGone
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    ChannelStats,
    NewEpisode,
    NewLongTermFact,
    NewTurn,
    RecordResult,
    SummaryState,
    Turn,
)
from memory.store import ChangeOutcome, ResetResult
from memory.stores.common import (
    FACT_COLS,
    HEADER_COLS,
    NO_UPPER_SEQ,
    TURN_COLS,
    ChannelHeader,
    FactRow,
    StatsRow,
    TurnEdit,
    TurnPosition,
    TurnRow,
    applied_change,
    channel_token,
    fact_values,
    recorded,
    refused_change,
    with_pending,
)
from memory.stores.sqlite import history
from memory.stores.sqlite.archive import insert_channel_fact, insert_episode
from memory.stores.sqlite.writer import WriteTx

__all__ = [
    "amend",
    "amended",
    "change",
    "channels",
    "commit_summary",
    "header",
    "import_state",
    "import_turns",
    "lease",
    "pending",
    "pending_size",
    "purge",
    "record",
    "reset",
    "snapshot",
    "stats",
    "summary_state",
    "turns",
]

_INSERT_TURN = f"INSERT INTO turns (channel_id, {TURN_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_BUMP_SEQ = (
    "UPDATE channels SET next_seq = next_seq + 1 WHERE id = ? "
    "RETURNING next_seq - 1, folded_through"
)
_PENDING_SIZE = (
    "SELECT count(*), coalesce(sum(tokens), 0) FROM turns WHERE channel_id = ? AND seq > ?"
)
_BUMP_SEQ_ANSWERING = (  # the same, only while the turn answered is stored
    "UPDATE channels SET next_seq = next_seq + 1 WHERE id = ? AND EXISTS "
    "(SELECT 1 FROM turns WHERE channel_id = ? AND seq = ? AND message_id = ?) "
    "RETURNING next_seq - 1, folded_through"
)
_UPSERT_FACT = (
    f"INSERT INTO facts (channel_id, {FACT_COLS}) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel_id, value) DO UPDATE SET "
    "context = excluded.context, "
    "first_seq = min(first_seq, excluded.first_seq), "
    "last_seen_seq = max(last_seen_seq, excluded.last_seen_seq)"
)


def _turn(key: ChannelKey, row: Sequence[Any]) -> Turn:
    return TurnRow(*row).turn(key)


# ---------------------------------------------------------------------------- channels


def header(conn: sqlite3.Connection, key: ChannelKey) -> ChannelHeader | None:
    """The channel's summary state row; None for an unknown channel."""
    row = conn.execute(
        f"SELECT {HEADER_COLS} FROM channels WHERE platform = ? AND workspace = ? AND channel = ?",
        (key.platform, key.workspace, key.channel),
    ).fetchone()
    return None if row is None else ChannelHeader(*row)


def channels(conn: sqlite3.Connection) -> list[ChannelKey]:
    """Every channel with a row."""
    rows = conn.execute("SELECT platform, workspace, channel FROM channels ORDER BY id")
    return [ChannelKey(*r) for r in rows.fetchall()]


def newest_message_ids(conn: sqlite3.Connection, key: ChannelKey, limit: int) -> list[str]:
    """Message ids of the newest ``limit`` user turns, newest seq first (a range scan from
    the end of the channel's clustered ``(channel_id, seq)`` key)."""
    h = header(conn, key)
    if h is None:
        return []
    rows = conn.execute(
        "SELECT message_id FROM turns WHERE channel_id = ? AND role = 'user' "
        "ORDER BY seq DESC LIMIT ?",
        (h.id, limit),
    )
    return [r[0] for r in rows.fetchall()]


# ---------------------------------------------------------------------------- turns


RecordHook = Callable[[WriteTx, Turn, object], None]
"""Writes another store adds to a created turn's transaction: ``(tx, stored, turn.extra)``."""
ResetHook = Callable[[WriteTx, ChannelKey], None]
"""Writes another store adds to a channel's ``reset`` transaction."""


def record(tx: WriteTx, turn: NewTurn, hooks: Sequence[RecordHook] = ()) -> RecordResult:
    """Store ``turn`` at the channel's next seq, or answer the turn with its message id; a
    created turn with an ``extra`` runs ``hooks`` in the same transaction. A turn that
    ``answers`` one no longer stored raises ``AnsweredTurnGone`` and writes nothing."""
    answers = turn.answers
    if answers is None:
        cid = tx.new_channel_id(turn.key)
    elif (found := tx.channel_id(turn.key, create=False)) is None:
        raise AnsweredTurnGone(turn.key, answers)  # no channel row: nothing it answers is stored
    else:
        cid = found
    row = tx.conn.execute(
        f"SELECT {TURN_COLS} FROM turns WHERE channel_id = ? AND message_id = ?",
        (cid, turn.message_id),
    ).fetchone()
    if row is not None:
        return RecordResult(_turn(turn.key, row), created=False)
    if answers is None:
        bumped = tx.conn.execute(_BUMP_SEQ, (cid,)).fetchone()
    else:  # the one writer: no reset can come between this check and the insert
        bumped = tx.conn.execute(_BUMP_SEQ_ANSWERING,
                                 (cid, cid, answers.seq, answers.message_id)).fetchone()
        if bumped is None:
            raise AnsweredTurnGone(turn.key, answers)
    seq, folded_through = bumped
    stored, result = recorded(turn, seq, folded_through)
    tx.conn.execute(_INSERT_TURN, (cid, *TurnRow.of(stored)))
    if turn.extra is not None:  # e.g. the reply it is owed, in the same transaction
        for hook in hooks:
            hook(tx, stored, turn.extra)
    # compaction's check, here rather than in a read of its own after the commit
    return with_pending(result, tx.conn.execute(_PENDING_SIZE, (cid, folded_through)).fetchone())


def change(tx: WriteTx, key: ChannelKey, message_id: str, edit: TurnEdit | None) -> ChangeOutcome:
    """Edit (or, with None, delete) an unfolded turn; see ``common.refused_change``."""
    cid = tx.channel_id(key, create=False)
    row = None if cid is None else tx.conn.execute(
        "SELECT t.seq, c.folded_through FROM turns t JOIN channels c ON c.id = t.channel_id "
        "WHERE t.channel_id = ? AND t.message_id = ?",
        (cid, message_id),
    ).fetchone()
    found = None if row is None else TurnPosition(*row)
    refused = refused_change(found)
    if refused is not None:
        return refused
    assert found is not None
    if edit is None:
        tx.conn.execute("DELETE FROM turns WHERE channel_id = ? AND seq = ?", (cid, found.seq))
    else:
        tx.conn.execute(
            "UPDATE turns SET text = ?, tokens = ? WHERE channel_id = ? AND seq = ?",
            (edit.text, edit.tokens, cid, found.seq),
        )
    tx.conn.execute("UPDATE channels SET version = version + 1 WHERE id = ?", (cid,))
    return applied_change(edit)


def amend(tx: WriteTx, key: ChannelKey, message_id: str, edit: TurnEdit) -> ChangeOutcome:
    """Set a turn's completed text, folded or not; a folded turn is queued (``amended``)
    for the next compaction. The triggers re-index it and drop its vectors."""
    cid = tx.channel_id(key, create=False)
    row = None if cid is None else tx.conn.execute(
        "SELECT t.seq, c.folded_through FROM turns t JOIN channels c ON c.id = t.channel_id "
        "WHERE t.channel_id = ? AND t.message_id = ?",
        (cid, message_id),
    ).fetchone()
    if row is None:
        return "missing"
    found = TurnPosition(*row)
    folded = found.seq <= found.folded_through
    tx.conn.execute(
        "UPDATE turns SET text = ?, tokens = ?, amended = ? WHERE channel_id = ? AND seq = ?",
        (edit.text, edit.tokens, int(folded), cid, found.seq),
    )
    tx.conn.execute("UPDATE channels SET version = version + 1 WHERE id = ?", (cid,))
    return "amended" if folded else "updated"


def amended(conn: sqlite3.Connection, key: ChannelKey, limit: int) -> list[Turn]:
    """Folded turns queued by ``amend``, oldest first (the partial index ``turns_amended``)."""
    h = header(conn, key)
    if h is None:
        return []
    rows = _turn_range(conn, "channel_id = ? AND amended = 1 AND seq <= ? ORDER BY seq LIMIT ?",
                       (h.id, h.folded_through, limit))
    return [_turn(key, r) for r in rows]


def _turn_range(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> list[Any]:
    return conn.execute(f"SELECT {TURN_COLS} FROM turns WHERE {sql}", args).fetchall()


def snapshot(
    conn: sqlite3.Connection, key: ChannelKey, limit: int, facts_limit: int,
    through_seq: int | None,
) -> tuple[SummaryState, list[Turn]]:
    """State plus the newest ``limit`` unfolded turns up to ``through_seq``."""
    state, cid = summary_state(conn, key, facts_limit)
    if cid is None:
        return state, []
    upper = through_seq if through_seq is not None else NO_UPPER_SEQ
    rows = _turn_range(
        conn, "channel_id = ? AND seq > ? AND seq <= ? ORDER BY seq DESC LIMIT ?",
        (cid, state.folded_through, upper, limit),
    )
    return state, [_turn(key, r) for r in reversed(rows)]


def pending(conn: sqlite3.Connection, key: ChannelKey, limit: int | None) -> list[Turn]:
    """Unfolded turns, oldest first."""
    h = header(conn, key)
    if h is None:
        return []
    rows = _turn_range(conn, "channel_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                       (h.id, h.folded_through, -1 if limit is None else limit))
    return [_turn(key, r) for r in rows]


def turns(conn: sqlite3.Connection, key: ChannelKey, after_seq: int, limit: int) -> list[Turn]:
    """Stored turns after ``after_seq``, oldest first."""
    h = header(conn, key)
    if h is None:
        return []
    rows = _turn_range(conn, "channel_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                       (h.id, after_seq, limit))
    return [_turn(key, r) for r in rows]


MAX_IDS = 500  # ids per ``IN (...)``: far below SQLite's bound on host parameters


def turns_with_ids(conn: sqlite3.Connection, key: ChannelKey, message_ids: Sequence[str]
                   ) -> list[Turn]:
    """Stored turns with these message ids, by seq ascending; unknown ids skipped."""
    h = header(conn, key)
    wanted = sorted(set(message_ids))
    if h is None or not wanted:
        return []
    rows: list[Any] = []
    for i in range(0, len(wanted), MAX_IDS):
        chunk = wanted[i:i + MAX_IDS]
        marks = ", ".join("?" * len(chunk))
        rows += _turn_range(conn, f"channel_id = ? AND message_id IN ({marks})", (h.id, *chunk))
    return sorted((_turn(key, r) for r in rows), key=lambda t: t.seq)


def pending_size(conn: sqlite3.Connection, key: ChannelKey) -> tuple[int, int]:
    """(count, tokens) of unfolded turns."""
    h = header(conn, key)
    if h is None:
        return 0, 0
    n, tokens = conn.execute(_PENDING_SIZE, (h.id, h.folded_through)).fetchone()
    return int(n), int(tokens)


def import_turns(tx: WriteTx, key: ChannelKey, turns: Sequence[Turn]) -> int:
    """Copy turns in with their seqs; existing seqs are kept. Returns how many were new."""
    cid = tx.new_channel_id(key)
    new = 0
    for t in turns:
        new += tx.conn.execute(
            f"{_INSERT_TURN} ON CONFLICT DO NOTHING", (cid, *TurnRow.of(t))
        ).rowcount
    if turns:
        top = max(t.seq for t in turns)
        tx.conn.execute(
            "UPDATE channels SET next_seq = max(next_seq, ?) WHERE id = ?", (top + 1, cid)
        )
    return new


# ---------------------------------------------------------------------------- summary state


def summary_state(
    conn: sqlite3.Connection, key: ChannelKey, facts_limit: int
) -> tuple[SummaryState, int | None]:
    """The committed state and the channel's id (None for an unknown channel)."""
    h = header(conn, key)
    if h is None:
        return SummaryState(key), None
    rows = conn.execute(
        f"SELECT {FACT_COLS} FROM facts WHERE channel_id = ? "
        "ORDER BY last_seen_seq DESC LIMIT ?",
        (h.id, facts_limit),
    ).fetchall()
    return h.state(key, (FactRow(*r).fact() for r in rows)), int(h.id)


def commit_summary(
    tx: WriteTx, key: ChannelKey, expected_version: int, text: str, folded_through: int,
    facts: Sequence[CarriedIdentifier], now: float, episode: NewEpisode | None,
    channel_facts: Sequence[NewLongTermFact], history_keep: int = 0,
    amended_seqs: Sequence[int] = (),
) -> bool:
    """Install the summary if the version is unchanged, with its episode, facts, the
    summary history row (``history.append``) and the ``amended_seqs`` it folded in
    taken off the queue."""
    cid = tx.channel_id(key, create=False)
    if cid is None:
        return False
    (was_folded,) = tx.conn.execute(
        "SELECT folded_through FROM channels WHERE id = ?", (cid,)
    ).fetchone()
    cur = tx.conn.execute(
        "UPDATE channels SET summary = ?, folded_through = ?, version = version + 1, "
        "last_compacted_at = ?, compactions = compactions + 1 "
        "WHERE id = ? AND version = ? AND folded_through <= ? AND next_seq > ?",
        (text, folded_through, now, cid, expected_version, folded_through, folded_through),
    )
    if cur.rowcount != 1:
        return False
    tx.conn.executemany(_UPSERT_FACT, fact_values(cid, facts))
    tx.conn.executemany("UPDATE turns SET amended = 0 WHERE channel_id = ? AND seq = ?",
                        [(cid, seq) for seq in amended_seqs])
    if episode is not None:
        insert_episode(tx.conn, cid, episode)
    for fact in channel_facts:
        insert_channel_fact(tx.conn, cid, fact, now)
    history.append(tx.conn, cid, text, was_folded + 1, folded_through, now, "compaction", "",
                   history_keep)
    return True


def stats(conn: sqlite3.Connection, key: ChannelKey) -> ChannelStats:
    """Counts for ``/summary``."""
    h = header(conn, key)
    if h is None:
        return ChannelStats.empty(key)
    total, pend, pending_tokens = conn.execute(
        "SELECT count(*), coalesce(sum(seq > ?), 0), "
        "coalesce(sum(CASE WHEN seq > ? THEN tokens ELSE 0 END), 0) "
        "FROM turns WHERE channel_id = ?",
        (h.folded_through, h.folded_through, h.id),
    ).fetchone()
    (facts,) = conn.execute("SELECT count(*) FROM facts WHERE channel_id = ?", (h.id,)).fetchone()
    return StatsRow(total, pend, pending_tokens, facts, h.compactions, h.last_compacted_at,
                    h.version).stats(key)


def reset(tx: WriteTx, key: ChannelKey, hooks: Sequence[ResetHook] = ()) -> ResetResult:
    """Delete the channel's turns, summary, facts and archive; keep its row and seqs; run
    ``hooks`` in the same transaction."""
    cid = tx.channel_id(key, create=False)
    if cid is None:
        return ResetResult(turns=0, had_summary=False, facts=0)
    conn, chan = tx.conn, channel_token(cid)
    (summary,) = conn.execute("SELECT summary FROM channels WHERE id = ?", (cid,)).fetchone()
    turns = conn.execute("DELETE FROM turns WHERE channel_id = ?", (cid,)).rowcount
    facts = conn.execute("DELETE FROM facts WHERE channel_id = ?", (cid,)).rowcount
    conn.execute("DELETE FROM episodes_fts WHERE chan = ?", (chan,))
    conn.execute("DELETE FROM memory_facts_fts WHERE chan = ?", (chan,))
    episodes = conn.execute("DELETE FROM episodes WHERE channel_id = ?", (cid,)).rowcount
    channel_facts = conn.execute("DELETE FROM memory_facts WHERE channel_id = ?", (cid,)).rowcount
    for hook in hooks:
        hook(tx, key)
    conn.execute("DELETE FROM summary_history WHERE channel_id = ?", (cid,))
    # Keep the row (and next_seq) so seqs never repeat; the version bump voids any
    # compaction that read the old state.
    conn.execute(
        "UPDATE channels SET summary = '', folded_through = next_seq - 1, "
        "version = version + 1, last_compacted_at = NULL, compactions = 0 WHERE id = ?",
        (cid,),
    )
    return ResetResult(turns=turns, had_summary=bool(summary), facts=facts, episodes=episodes,
                       channel_facts=channel_facts)


def purge(tx: WriteTx, cutoff: float) -> int:
    """Retention: old episodes and old folded turns."""
    conn = tx.conn
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


def import_state(tx: WriteTx, state: SummaryState) -> None:
    """Set a channel's summary state exactly (copy-db)."""
    s, cid = state, tx.new_channel_id(state.key)
    tx.conn.execute(
        "UPDATE channels SET summary = ?, version = ?, folded_through = ?, "
        "last_compacted_at = ?, compactions = ?, next_seq = max(next_seq, ?) WHERE id = ?",
        (s.text, s.version, s.folded_through, s.last_compacted_at, s.compactions,
         s.folded_through + 1, cid),
    )
    tx.conn.execute("DELETE FROM facts WHERE channel_id = ?", (cid,))
    tx.conn.executemany(
        f"INSERT INTO facts (channel_id, {FACT_COLS}) VALUES (?, ?, ?, ?, ?)",
        fact_values(cid, s.facts),
    )


# ---------------------------------------------------------------------------- leases


def lease(tx: WriteTx, key: ChannelKey, owner: str, ttl: float | None) -> bool:
    """Take or renew the lease for ``ttl`` seconds; with None, release it."""
    args = (key.platform, key.workspace, key.channel)
    now = time.time()
    if ttl is None:
        return tx.conn.execute(
            "DELETE FROM leases WHERE platform = ? AND workspace = ? AND channel = ? "
            "AND owner = ?",
            (*args, owner),
        ).rowcount == 1
    return tx.conn.execute(
        "INSERT INTO leases (platform, workspace, channel, owner, expires_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (platform, workspace, channel) DO UPDATE SET "
        "owner = excluded.owner, expires_at = excluded.expires_at "
        "WHERE leases.expires_at <= ? OR leases.owner = excluded.owner",
        (*args, owner, now + ttl, now),
    ).rowcount == 1
