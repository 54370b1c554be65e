"""SQLite schema and its forward migrations.

``MIGRATIONS[i]`` takes a database from version ``i`` to ``i + 1``. Never edit a released
step; append a new one. Steps whose tables are not memory's are empty here (the
application migrates those, one ladder per role). A file whose version is higher than
``len(MIGRATIONS)`` was written by a newer gistbot and is refused (``SchemaTooNewError``)
instead of being misread.

Every hot query is served by an index whose cost does not grow with history length:
``turns`` is clustered on ``(channel_id, seq)`` (WITHOUT ROWID), so "unfolded turns" and
"newest N turns" are range scans from the end; ``(channel_id, message_id)`` makes ingestion
idempotent; ``facts_recent`` orders facts by last mention. Turn search reads ``turns_fts``
by a rowid range of one channel (step 5; without per-row sizes since step 11; English words
stemmed since step 15). Turn vectors (step 16) share the turns' key; turns amended after
they were folded are found by a partial index (step 17).
"""

from __future__ import annotations

import logging
import sqlite3

from memory.stores.common import schema_too_new

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]

log = logging.getLogger(__name__)

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE channels (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        platform TEXT NOT NULL,
        workspace TEXT NOT NULL,
        channel TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        version INTEGER NOT NULL DEFAULT 0,
        folded_through INTEGER NOT NULL DEFAULT 0,
        next_seq INTEGER NOT NULL DEFAULT 1,
        last_compacted_at REAL,
        compactions INTEGER NOT NULL DEFAULT 0,
        UNIQUE (platform, workspace, channel)
    );
    CREATE TABLE turns (
        channel_id INTEGER NOT NULL REFERENCES channels(id),
        seq INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        author_id TEXT NOT NULL,
        author_name TEXT NOT NULL,
        text TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        sent_at REAL NOT NULL,
        PRIMARY KEY (channel_id, seq)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX turns_message ON turns (channel_id, message_id);
    CREATE INDEX turns_sent_at ON turns (sent_at);
    CREATE TABLE facts (
        channel_id INTEGER NOT NULL REFERENCES channels(id),
        value TEXT NOT NULL,
        context TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seen_seq INTEGER NOT NULL,
        PRIMARY KEY (channel_id, value)
    ) WITHOUT ROWID;
    CREATE INDEX facts_recent ON facts (channel_id, last_seen_seq DESC);
    """,
    # 2: compaction leases (single-flight across processes sharing the file; they expire,
    # so a dead process never blocks a channel for good) and event claims (no longer used).
    """
    CREATE TABLE leases (
        platform TEXT NOT NULL,
        workspace TEXT NOT NULL,
        channel TEXT NOT NULL,
        owner TEXT NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (platform, workspace, channel)
    ) WITHOUT ROWID;
    CREATE TABLE events (
        event_id TEXT PRIMARY KEY,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX events_expiry ON events (expires_at);
    """,
    # 3: the long-term archive. ``episodes`` (what each compaction folded) and
    # ``memory_facts`` (durable statements; not the carried identifiers of ``facts``), each
    # with an FTS5 index over the terms of ``memory.search_text`` whose rowid is the row's
    # id. ``chan`` holds "c<channel id>" so a query is ANDed with its channel inside FTS5
    # and never ranks or returns another channel's rows.
    """
    CREATE TABLE episodes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel_id INTEGER NOT NULL REFERENCES channels(id),
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        started_at REAL NOT NULL,
        ended_at REAL NOT NULL,
        speakers TEXT NOT NULL,
        text TEXT NOT NULL
    );
    CREATE INDEX episodes_channel ON episodes (channel_id, id DESC);
    CREATE INDEX episodes_ended ON episodes (ended_at);
    CREATE TABLE memory_facts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel_id INTEGER NOT NULL REFERENCES channels(id),
        text TEXT NOT NULL,
        source_seqs TEXT NOT NULL,
        author TEXT NOT NULL,
        pinned INTEGER NOT NULL,
        created_at REAL NOT NULL,
        superseded_by INTEGER
    );
    CREATE INDEX memory_facts_channel ON memory_facts (channel_id, id DESC);
    CREATE VIRTUAL TABLE episodes_fts USING fts5 (chan, terms, tokenize = 'unicode61');
    CREATE VIRTUAL TABLE memory_facts_fts USING fts5 (chan, terms, tokenize = 'unicode61');
    """,
    # 4: term document counts, so a query keeps only its rarest terms: an OR over common
    # words would make BM25 score most of a large archive on every reply.
    """
    CREATE VIRTUAL TABLE episodes_vocab USING fts5vocab (episodes_fts, 'row');
    CREATE VIRTUAL TABLE memory_facts_vocab USING fts5vocab (memory_facts_fts, 'row');
    """,
    # 5: full-text search over every stored turn (``turn_search``, which says why it looks
    # like this). ``turns_fts`` is contentless: it indexes the terms of
    # ``memory.search_text`` (CJK bigrams), which FTS5 could not read back from ``turns``.
    # Its rowid is (channel_id << 32) | seq. Triggers keep it in step with every write to
    # ``turns``: a new or edited turn's rowid goes to ``turns_unindexed`` and the writer
    # indexes the queue at the end of its batch, before the COMMIT (``turn_search.drain``);
    # a delete removes the entry at once. They call gistbot_terms(author_name, text), which every
    # connection of the store registers before migrating. The last statements index the
    # turns a database of version 4 already holds.
    """
    CREATE VIRTUAL TABLE turns_fts USING fts5 (
        terms, content = '', tokenize = 'unicode61 remove_diacritics 0'
    );
    CREATE VIRTUAL TABLE turns_vocab USING fts5vocab (turns_fts, 'row');
    CREATE TABLE turns_unindexed (id INTEGER PRIMARY KEY);
    CREATE TRIGGER turns_fts_insert AFTER INSERT ON turns BEGIN
        INSERT OR IGNORE INTO turns_unindexed (id) VALUES ((new.channel_id << 32) | new.seq);
    END;
    CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN
        INSERT INTO turns_fts (turns_fts, rowid, terms)
        SELECT 'delete', (old.channel_id << 32) | old.seq, gistbot_terms(old.author_name, old.text)
        WHERE NOT EXISTS (
            SELECT 1 FROM turns_unindexed WHERE id = (old.channel_id << 32) | old.seq
        );
        DELETE FROM turns_unindexed WHERE id = (old.channel_id << 32) | old.seq;
    END;
    CREATE TRIGGER turns_fts_update AFTER UPDATE OF text, author_name ON turns BEGIN
        INSERT INTO turns_fts (turns_fts, rowid, terms)
        SELECT 'delete', (old.channel_id << 32) | old.seq, gistbot_terms(old.author_name, old.text)
        WHERE NOT EXISTS (
            SELECT 1 FROM turns_unindexed WHERE id = (old.channel_id << 32) | old.seq
        );
        INSERT OR IGNORE INTO turns_unindexed (id) VALUES ((new.channel_id << 32) | new.seq);
    END;
    INSERT INTO turns_fts (rowid, terms)
    SELECT (channel_id << 32) | seq, gistbot_terms(author_name, text) FROM turns;
    """,
    # 6: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 7: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 8: summary history for the operator's inspector (``history``): every committed
    # summary, written in the commit's own transaction, pruned to SUMMARY_HISTORY per channel.
    """
    CREATE TABLE IF NOT EXISTS summary_history (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel_id INTEGER NOT NULL REFERENCES channels(id),
        version INTEGER NOT NULL,
        text TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        committed_at REAL NOT NULL,
        source TEXT NOT NULL,
        author TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX IF NOT EXISTS summary_history_channel ON summary_history (channel_id, id DESC);
    """,
    # 9: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 10: turns by the time they were sent, for ``/catchup`` and digests (``catchup``);
    # the rest of this step is not memory's (the application migrates it).
    """
    CREATE INDEX IF NOT EXISTS turns_channel_sent ON turns (channel_id, sent_at);
    """,
    # 11: ``turns_fts`` without per-row sizes (``columnsize = 0``), rebuilt from ``turns``.
    # Its rowids are (channel_id << 32) | seq, so the sizes table (``turns_fts_docsize``)
    # took a write on another page for every channel of a batch: about half the WAL pages
    # the index added to a group commit, and one more read per matching turn in a search.
    # Without it FTS5's bm25() takes every turn's length alike; ``turn_search`` re-ranks
    # the best candidates by the turns' stored token counts instead. Everything is indexed
    # by the last statement, so nothing stays queued.
    """
    DROP TABLE turns_vocab;
    DROP TABLE turns_fts;
    CREATE VIRTUAL TABLE turns_fts USING fts5 (
        terms, content = '', columnsize = 0, tokenize = 'unicode61 remove_diacritics 0'
    );
    CREATE VIRTUAL TABLE turns_vocab USING fts5vocab (turns_fts, 'row');
    DELETE FROM turns_unindexed;
    INSERT INTO turns_fts (rowid, terms)
    SELECT (channel_id << 32) | seq, gistbot_terms(author_name, text) FROM turns;
    """,
    # 12: writes to the archive counted per table, by triggers in the writing transaction,
    # so an archive search can reuse the term counts it read from the vocabulary tables
    # until the next write (``archive_vocab``: a lookup cost ~25 µs a term, ~30 a reply).
    """
    CREATE TABLE archive_writes (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO archive_writes (name, n) VALUES ('episodes', 0), ('memory_facts', 0);
    CREATE TRIGGER episodes_written_insert AFTER INSERT ON episodes BEGIN
        UPDATE archive_writes SET n = n + 1 WHERE name = 'episodes';
    END;
    CREATE TRIGGER episodes_written_delete AFTER DELETE ON episodes BEGIN
        UPDATE archive_writes SET n = n + 1 WHERE name = 'episodes';
    END;
    CREATE TRIGGER episodes_written_update AFTER UPDATE ON episodes BEGIN
        UPDATE archive_writes SET n = n + 1 WHERE name = 'episodes';
    END;
    CREATE TRIGGER memory_facts_written_insert AFTER INSERT ON memory_facts BEGIN
        UPDATE archive_writes SET n = n + 1 WHERE name = 'memory_facts';
    END;
    CREATE TRIGGER memory_facts_written_delete AFTER DELETE ON memory_facts BEGIN
        UPDATE archive_writes SET n = n + 1 WHERE name = 'memory_facts';
    END;
    CREATE TRIGGER memory_facts_written_update AFTER UPDATE ON memory_facts BEGIN
        UPDATE archive_writes SET n = n + 1 WHERE name = 'memory_facts';
    END;
    """,
    # 13: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 14: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 15: the turn index stems English words (FTS5's ``porter`` over the same
    # ``unicode61`` tokenizer), so "cooked" finds "cooking" and "fans" finds "fan"; CJK
    # bigrams and other non-ASCII terms are left as they are. Queries are stemmed by the
    # same tokenizer. Rebuilt from ``turns`` as in step 11.
    """
    DROP TABLE turns_vocab;
    DROP TABLE turns_fts;
    CREATE VIRTUAL TABLE turns_fts USING fts5 (
        terms, content = '', columnsize = 0,
        tokenize = 'porter unicode61 remove_diacritics 0'
    );
    CREATE VIRTUAL TABLE turns_vocab USING fts5vocab (turns_fts, 'row');
    DELETE FROM turns_unindexed;
    INSERT INTO turns_fts (rowid, terms)
    SELECT (channel_id << 32) | seq, gistbot_terms(author_name, text) FROM turns;
    """,
    # 16: one vector per turn and embedding model (``embeddings``, semantic recall), keyed
    # by the turn so that deleting a turn, or editing its text, drops its vectors in the
    # same transaction. Nothing is written while ``EMBEDDING_MODEL`` is unset.
    """
    CREATE TABLE turn_embeddings (
        channel_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        model TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (channel_id, seq, model)
    ) WITHOUT ROWID;
    CREATE TRIGGER turn_embeddings_deleted AFTER DELETE ON turns BEGIN
        DELETE FROM turn_embeddings WHERE channel_id = old.channel_id AND seq = old.seq;
    END;
    CREATE TRIGGER turn_embeddings_edited AFTER UPDATE OF text ON turns
    WHEN new.text IS NOT old.text BEGIN
        DELETE FROM turn_embeddings WHERE channel_id = old.channel_id AND seq = old.seq;
    END;
    """,
    # 17: text that arrived for a turn after compaction folded it (its files read late,
    # ``MemoryStore.amend``): the turn's row holds it at once, and ``amended`` queues the
    # turn for the next compaction, which folds it in and clears the mark in its commit.
    # The partial index holds only the queued turns, so looking for them costs nothing.
    """
    ALTER TABLE turns ADD COLUMN amended INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX turns_amended ON turns (channel_id, seq) WHERE amended = 1;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)
_TURN_INDEX_REBUILT = 15
"""The step that rebuilds ``turns_fts`` from every stored turn (seconds per million)."""


def _statements(script: str) -> list[str]:
    """The statements of ``script``; a trigger body's ``;`` does not end its statement."""
    out, pending = [], ""
    for part in script.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                out.append(pending)
            pending = ""
    return out


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the file to ``SCHEMA_VERSION``, one transaction per step; refuse a newer one."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    current = int(row[0]) if row else 0
    if current > SCHEMA_VERSION:
        raise schema_too_new(current, SCHEMA_VERSION)
    if 0 < current < SCHEMA_VERSION:  # a long step is not a hang
        log.info("upgrading the database from schema version %d to %d%s", current,
                 SCHEMA_VERSION, "; rebuilding the turn search index takes about 7 s per "
                 "million stored turns" if current < _TURN_INDEX_REBUILT else "")
    for version in range(current, SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version + 1,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
