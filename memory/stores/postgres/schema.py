"""PostgreSQL schema and its forward migrations.

``MIGRATIONS[i]`` takes a schema from version ``i`` to ``i + 1`` (as in the SQLite
``schema``: never edit a released step, append one); a newer version is refused
(``SchemaTooNewError``).
Migration runs in one transaction under an advisory lock, so replicas starting together
migrate once. Version 1 mirrors SQLite's tables; version 2 adds ``leases`` (per-channel
compaction single-flight, expiring by the database clock, so replicas with skewed clocks
agree) and ``events`` (no longer used). Steps whose tables are not memory's are empty here:
the application migrates those, one ladder per role.

Hot queries do not grow with history: ``turns`` is keyed ``(channel_id, seq)`` (unfolded
and newest-N turns are index range scans), ``(channel_id, message_id)`` makes ingestion
idempotent, ``facts_recent`` orders facts by last mention.
"""

from __future__ import annotations

import re
from typing import Any

from memory.errors import StoreOpenError
from memory.stores.common import schema_too_new

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "quote_schema"]

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE channels (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        platform text NOT NULL,
        workspace text NOT NULL,
        channel text NOT NULL,
        summary text NOT NULL DEFAULT '',
        version bigint NOT NULL DEFAULT 0,
        folded_through bigint NOT NULL DEFAULT 0,
        next_seq bigint NOT NULL DEFAULT 1,
        last_compacted_at double precision,
        compactions integer NOT NULL DEFAULT 0,
        UNIQUE (platform, workspace, channel)
    );
    CREATE TABLE turns (
        channel_id bigint NOT NULL REFERENCES channels(id),
        seq bigint NOT NULL,
        message_id text NOT NULL,
        role text NOT NULL CHECK (role IN ('user', 'assistant')),
        author_id text NOT NULL,
        author_name text NOT NULL,
        text text NOT NULL,
        tokens integer NOT NULL,
        sent_at double precision NOT NULL,
        PRIMARY KEY (channel_id, seq)
    );
    CREATE UNIQUE INDEX turns_message ON turns (channel_id, message_id);
    CREATE INDEX turns_sent_at ON turns (sent_at);
    CREATE TABLE facts (
        channel_id bigint NOT NULL REFERENCES channels(id),
        value text NOT NULL,
        context text NOT NULL,
        first_seq bigint NOT NULL,
        last_seen_seq bigint NOT NULL,
        PRIMARY KEY (channel_id, value)
    );
    CREATE INDEX facts_recent ON facts (channel_id, last_seen_seq DESC);
    """,
    """
    CREATE TABLE leases (
        platform text NOT NULL,
        workspace text NOT NULL,
        channel text NOT NULL,
        owner text NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (platform, workspace, channel)
    );
    CREATE TABLE events (
        event_id text PRIMARY KEY,
        claimer text NOT NULL,
        expires_at timestamptz NOT NULL
    );
    CREATE INDEX events_expiry ON events (expires_at);
    """,
    # 3: the long-term archive (see the SQLite schema, step 3). ``search`` is
    # to_tsvector('simple', 'c<channel id> ' || terms), so a query ANDs its channel's token
    # inside the GIN index and never ranks another channel's rows.
    """
    CREATE TABLE episodes (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel_id bigint NOT NULL REFERENCES channels(id),
        first_seq bigint NOT NULL,
        last_seq bigint NOT NULL,
        started_at double precision NOT NULL,
        ended_at double precision NOT NULL,
        speakers text[] NOT NULL,
        text text NOT NULL,
        search tsvector NOT NULL
    );
    CREATE INDEX episodes_channel ON episodes (channel_id, id DESC);
    CREATE INDEX episodes_ended ON episodes (ended_at);
    CREATE INDEX episodes_search ON episodes USING gin (search);
    CREATE TABLE memory_facts (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel_id bigint NOT NULL REFERENCES channels(id),
        text text NOT NULL,
        source_seqs bigint[] NOT NULL,
        author text NOT NULL,
        pinned boolean NOT NULL,
        created_at double precision NOT NULL,
        superseded_by bigint,
        search tsvector NOT NULL
    );
    CREATE INDEX memory_facts_channel ON memory_facts (channel_id, id DESC);
    CREATE INDEX memory_facts_search ON memory_facts USING gin (search);
    """,
    # 4: full-text search over every stored turn (``turn_search``). ``terms`` is
    # to_tsvector('simple', <memory.search_text terms of the text>), written with the turn
    # (record, edit, copy-db import) in the same statement; the GIN index serves the
    # search. It is computed in Python (CJK bigrams), so rows stored before this step are
    # NULL until ``turn_search.backfill`` indexes them in batches at open; the partial
    # index finds them (and turns an older replica wrote during a rolling upgrade).
    """
    ALTER TABLE turns ADD COLUMN terms tsvector;
    CREATE INDEX turns_terms ON turns USING gin (terms);
    CREATE INDEX turns_unindexed ON turns (channel_id, seq) WHERE terms IS NULL;
    """,
    # 5: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 6: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 7: summary history for the operator's inspector (``history``): every committed
    # summary, written in the commit's own transaction, pruned to SUMMARY_HISTORY per channel.
    """
    CREATE TABLE IF NOT EXISTS summary_history (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel_id bigint NOT NULL REFERENCES channels(id),
        version bigint NOT NULL,
        text text NOT NULL,
        first_seq bigint NOT NULL,
        last_seq bigint NOT NULL,
        committed_at double precision NOT NULL,
        source text NOT NULL,
        author text NOT NULL DEFAULT ''
    );
    CREATE INDEX IF NOT EXISTS summary_history_channel ON summary_history (channel_id, id DESC);
    """,
    # 8: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 9: turns by the time they were sent, for ``/catchup`` and digests (``catchup``);
    # the rest of this step is not memory's (the application migrates it).
    """
    CREATE INDEX IF NOT EXISTS turns_channel_sent ON turns (channel_id, sent_at);
    """,
    # 10: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 11: empty: its tables are not memory's (the application migrates them, one ladder per role)
    "",
    # 12: the turn search stems English words (``turn_search``): the text search
    # configuration ``gistbot_stem`` is ``simple`` with ASCII words mapped to an English
    # Snowball dictionary without stop words (a query drops its own; the common-words pass
    # needs them). Every turn's ``terms`` is cleared and written again, stemmed, by
    # ``turn_search.backfill`` at open, in batches (the path of step 4).
    """
    CREATE TEXT SEARCH DICTIONARY gistbot_english (
        TEMPLATE = pg_catalog.snowball, Language = english
    );
    CREATE TEXT SEARCH CONFIGURATION gistbot_stem (COPY = pg_catalog.simple);
    ALTER TEXT SEARCH CONFIGURATION gistbot_stem
        ALTER MAPPING FOR asciiword, asciihword, hword_asciipart WITH gistbot_english;
    UPDATE turns SET terms = NULL WHERE terms IS NOT NULL;
    """,
    # 13: one vector per turn and embedding model (``embeddings``, semantic recall) as
    # bytea, scanned like SQLite's; deleting a turn or editing its text drops its vectors
    # by trigger, in the writing transaction.
    """
    CREATE TABLE turn_embeddings (
        channel_id bigint NOT NULL,
        seq bigint NOT NULL,
        model text NOT NULL,
        vector bytea NOT NULL,
        PRIMARY KEY (channel_id, seq, model)
    );
    CREATE FUNCTION gistbot_drop_turn_embeddings() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
    BEGIN
        DELETE FROM turn_embeddings WHERE channel_id = OLD.channel_id AND seq = OLD.seq;
        RETURN NULL;
    END $$;
    CREATE TRIGGER turn_embeddings_deleted AFTER DELETE ON turns
        FOR EACH ROW EXECUTE FUNCTION gistbot_drop_turn_embeddings();
    CREATE TRIGGER turn_embeddings_edited AFTER UPDATE OF text ON turns
        FOR EACH ROW WHEN (NEW.text IS DISTINCT FROM OLD.text)
        EXECUTE FUNCTION gistbot_drop_turn_embeddings();
    """,
    # 14: turns amended after compaction folded them (see the SQLite schema, step 17),
    # queued for the next compaction by ``amended``; the partial index holds only those.
    """
    ALTER TABLE turns ADD COLUMN amended boolean NOT NULL DEFAULT false;
    CREATE INDEX turns_amended ON turns (channel_id, seq) WHERE amended;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def quote_schema(schema: str) -> str:
    """The schema name as a quoted identifier; only plain names are accepted.

    Identifiers cannot be query parameters, so the name is validated instead."""
    if not _SCHEMA_NAME.match(schema):
        raise StoreOpenError(
            f"invalid PostgreSQL schema name {schema!r}: use letters, digits and _ only"
        )
    return f'"{schema}"'


async def migrate(conn: Any, schema: str) -> int:
    """Create ``schema`` if missing and bring it to ``SCHEMA_VERSION``; return the old version.

    ``conn`` is an asyncpg connection whose ``search_path`` is ``schema``."""
    quoted = quote_schema(schema)
    async with conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"gistbot:migrate:{schema}"
        )
        # Check first: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when
        # the schema exists, which a least-privilege role may not have.
        if await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema) is None:
            await conn.execute(f"CREATE SCHEMA {quoted}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {quoted}.schema_version (version integer NOT NULL)"
        )
        current = int(
            await conn.fetchval(f"SELECT coalesce(max(version), 0) FROM {quoted}.schema_version")
        )
        if current > SCHEMA_VERSION:
            raise schema_too_new(current, SCHEMA_VERSION)
        for version in range(current, SCHEMA_VERSION):
            if MIGRATIONS[version]:  # several statements: simple protocol
                await conn.execute(MIGRATIONS[version])
        if current != SCHEMA_VERSION:
            await conn.execute(f"DELETE FROM {quoted}.schema_version")
            await conn.execute(
                f"INSERT INTO {quoted}.schema_version (version) VALUES ($1)", SCHEMA_VERSION
            )
    return current
