"""PostgreSQL schema, forward migrations, and the statements and error mapping of
``PostgresStore``.

``MIGRATIONS[i]`` takes a schema from version ``i`` to ``i + 1`` (as in ``sqlite_schema``:
never edit a released step, append one); a newer version is refused (``SchemaTooNewError``).
Migration runs in one transaction under an advisory lock, so replicas starting together
migrate once. Version 1 mirrors SQLite's tables; version 2 adds ``leases`` (per-channel
compaction single-flight) and ``events`` (event de-duplication), whose expiry uses the
database clock, so replicas with skewed clocks agree.

Hot queries do not grow with history: ``turns`` is keyed ``(channel_id, seq)`` (unfolded
and newest-N turns are index range scans), ``(channel_id, message_id)`` makes ingestion
idempotent, ``facts_recent`` orders facts by last mention.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from memory.errors import SchemaTooNewError, StoreBusyError, StoreError, StoreOpenError

__all__ = ["LOST", "MIGRATIONS", "SCHEMA_VERSION", "migrate", "open_error", "translate"]

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
    # 3: the long-term archive (see sqlite_schema step 3). ``search`` is
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
            raise SchemaTooNewError(
                f"this database has schema version {current}, but this gistbot knows only "
                f"up to {SCHEMA_VERSION}; upgrade gistbot or use another DATABASE_URL"
            )
        for version in range(current, SCHEMA_VERSION):
            await conn.execute(MIGRATIONS[version])  # several statements: simple protocol
        if current != SCHEMA_VERSION:
            await conn.execute(f"DELETE FROM {quoted}.schema_version")
            await conn.execute(
                f"INSERT INTO {quoted}.schema_version (version) VALUES ($1)", SCHEMA_VERSION
            )
    return current


# ---------------------------------------------------------------------------- statements
# $1, $2, $3 are always (platform, workspace, channel) when a statement takes a channel key.

TURN_COLS = "seq, message_id, role, author_id, author_name, text, tokens, sent_at"
_T_COLS = ", ".join(f"t.{c.strip()}" for c in TURN_COLS.split(","))
_BY_KEY = "platform = $1 AND workspace = $2 AND channel = $3"

FIND_TURN = (
    f"SELECT {_T_COLS} FROM channels c JOIN turns t ON t.channel_id = c.id "
    f"WHERE c.{_BY_KEY.replace(' AND ', ' AND c.')} AND t.message_id = $4"
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
INSERT_TURN = (
    f"INSERT INTO turns (channel_id, {TURN_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
    "ON CONFLICT (channel_id, message_id) DO NOTHING RETURNING seq"
)
COMMIT_SUMMARY = (
    "UPDATE channels SET summary = $5, folded_through = $6, version = version + 1, "
    "last_compacted_at = $7, compactions = compactions + 1 "
    f"WHERE {_BY_KEY} AND version = $4 AND folded_through <= $6 AND next_seq > $6 RETURNING id"
)
# copy-db: seqs come from the source; re-importing is a no-op, so a copy can resume.
IMPORT_TURN = (
    f"INSERT INTO turns (channel_id, {TURN_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
    "ON CONFLICT DO NOTHING"
)
IMPORT_NEXT_SEQ = "UPDATE channels SET next_seq = greatest(next_seq, $2) WHERE id = $1"
IMPORT_STATE = (
    "UPDATE channels SET summary = $2, version = $3, folded_through = $4::bigint, "
    "last_compacted_at = $5, compactions = $6, next_seq = greatest(next_seq, $4::bigint + 1) "
    "WHERE id = $1"
)
IMPORT_FACT = (
    "INSERT INTO facts (channel_id, value, context, first_seq, last_seen_seq) "
    "VALUES ($1, $2, $3, $4, $5)"
)
UPSERT_FACT = (
    "INSERT INTO facts (channel_id, value, context, first_seq, last_seen_seq) "
    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (channel_id, value) DO UPDATE SET "
    "context = excluded.context, "
    "first_seq = least(facts.first_seq, excluded.first_seq), "
    "last_seen_seq = greatest(facts.last_seen_seq, excluded.last_seen_seq)"
)
LOCK_CHANNEL = f"SELECT id, folded_through, summary FROM channels WHERE {_BY_KEY} FOR UPDATE"
HEADER = (
    "SELECT id, summary, version, folded_through, last_compacted_at, compactions "
    f"FROM channels WHERE {_BY_KEY}"
)
FACTS = (
    "SELECT value, context, first_seq, last_seen_seq FROM facts WHERE channel_id = $1 "
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
PENDING_SIZE = (
    "SELECT count(*), coalesce(sum(t.tokens), 0) "
    f"{_LATERAL.format(lower='c.folded_through', limit='')}"
)
TURNS_AFTER = f"SELECT {_T_COLS} {_LATERAL.format(lower='$4', limit=' LIMIT $5')} ORDER BY t.seq"
STATS = (  # in ChannelStats' field order
    "SELECT n.total, n.total - n.pend, n.pend, n.ptok, 0, "
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
PURGE_EVENTS = "DELETE FROM events WHERE expires_at < clock_timestamp()"
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
# ``claimer`` is unique per call, so a retry after a lost connection still wins its own claim.
CLAIM_EVENT = (
    "INSERT INTO events (event_id, claimer, expires_at) "
    "VALUES ($1, $2, clock_timestamp() + $3 * interval '1 second') "
    "ON CONFLICT (event_id) DO UPDATE SET "
    "claimer = excluded.claimer, expires_at = excluded.expires_at "
    "WHERE events.expires_at <= clock_timestamp() OR events.claimer = excluded.claimer "
    "RETURNING event_id"
)
SEQ_OF = "SELECT seq FROM turns WHERE channel_id = $1 AND message_id = $2"
DELETE_TURN = "DELETE FROM turns WHERE channel_id = $1 AND seq = $2"
EDIT_TURN = "UPDATE turns SET text = $3, tokens = $4 WHERE channel_id = $1 AND seq = $2"
BUMP_VERSION = "UPDATE channels SET version = version + 1 WHERE id = $1"
RESET_TURNS = "DELETE FROM turns WHERE channel_id = $1"
RESET_FACTS = "DELETE FROM facts WHERE channel_id = $1"
# Keeping the row and next_seq means seqs never repeat; the version bump voids compactions.
RESET_CHANNEL = (
    "UPDATE channels SET summary = '', folded_through = next_seq - 1, version = version + 1, "
    "last_compacted_at = NULL, compactions = 0 WHERE id = $1"
)
CHANNELS = "SELECT platform, workspace, channel FROM channels ORDER BY id"

# ---------------------------------------------------------------------------- archive
EPISODE_COLS = "id, first_seq, last_seq, started_at, ended_at, speakers, text"
CFACT_COLS = "id, text, source_seqs, author, pinned, created_at, superseded_by"
INSERT_EPISODE = (
    "INSERT INTO episodes (channel_id, first_seq, last_seq, started_at, ended_at, speakers, "
    "text, search) VALUES ($1, $2, $3, $4, $5, $6, $7, to_tsvector('simple', $8))"
)
INSERT_CFACT = (
    "INSERT INTO memory_facts (channel_id, text, source_seqs, author, pinned, created_at, "
    "search) VALUES ($1, $2, $3, $4, $5, $6, to_tsvector('simple', $7)) RETURNING id"
)
SUPERSEDE = (
    "UPDATE memory_facts SET superseded_by = $1 WHERE id = $2 AND channel_id = $3 "
    "AND superseded_by IS NULL"
)
DELETE_CFACT = f"DELETE FROM memory_facts WHERE id = $1 AND channel_id = $2 RETURNING {CFACT_COLS}"
CHANNEL_ID = f"SELECT id FROM channels WHERE {_BY_KEY}"
LIST_CFACTS = (
    f"SELECT {CFACT_COLS} FROM memory_facts WHERE channel_id = $1 "
    "AND ($2 OR superseded_by IS NULL) ORDER BY id DESC LIMIT $3"
)
LIST_EPISODES = (
    f"SELECT {EPISODE_COLS} FROM episodes WHERE channel_id = $1 ORDER BY id DESC LIMIT $2"
)
SEARCH_CFACTS = (
    f"SELECT {CFACT_COLS} FROM memory_facts, to_tsquery('simple', $2) q "
    "WHERE channel_id = $1 AND search @@ q AND ($4 OR superseded_by IS NULL) "
    "ORDER BY superseded_by IS NOT NULL, ts_rank(search, q) DESC, id DESC LIMIT $3"
)
SEARCH_EPISODES = (
    f"SELECT {EPISODE_COLS} FROM episodes, to_tsquery('simple', $2) q "
    "WHERE channel_id = $1 AND search @@ q ORDER BY ts_rank(search, q) DESC, id DESC LIMIT $3"
)
RESET_EPISODES = "DELETE FROM episodes WHERE channel_id = $1"
RESET_CFACTS = "DELETE FROM memory_facts WHERE channel_id = $1"
PURGE_EPISODES = "DELETE FROM episodes WHERE ended_at < $1"

# ---------------------------------------------------------------------------- errors

_x = asyncpg.exceptions
LOST: tuple[type[BaseException], ...] = (
    _x.PostgresConnectionError,  # includes ConnectionDoesNotExistError
    _x.InterfaceError,
    _x.AdminShutdownError,  # pg_terminate_backend, server restart
    _x.CrashShutdownError,
    _x.CannotConnectNowError,
    _x.DeadlockDetectedError,  # PostgreSQL rolled the transaction back: retrying is safe
    ConnectionError,
)
"""Errors after which an operation is retried once on a fresh connection."""
_BUSY = (
    _x.LockNotAvailableError,
    _x.DeadlockDetectedError,
    _x.SerializationError,
    _x.QueryCanceledError,
)
OPEN_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError)


def count(status: str) -> int:
    """Rows a command touched, from its status ("DELETE 5" -> 5)."""
    return int(status.rsplit(" ", 1)[-1])


def translate(exc: BaseException) -> StoreError:
    """The ``memory.errors`` class for an asyncpg error, keeping the cause."""
    if isinstance(exc, _BUSY):
        err: StoreError = StoreBusyError(f"the database is busy: {exc}")
    else:
        err = StoreError(f"database error: {exc}")
    err.__cause__ = exc
    return err


def _redact(dsn: str) -> str:
    try:
        parts = urlsplit(dsn)
        host = f"{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"
        user = f"{parts.username}@" if parts.username else ""
        return f"{parts.scheme}://{user}{host}{parts.path}"
    except ValueError:
        return "DATABASE_URL"


def open_error(dsn: str, exc: BaseException) -> StoreOpenError:
    """A ``StoreOpenError`` that names the database (never its password) and the fix."""
    if isinstance(exc, _x.InvalidCatalogNameError):
        hint = "the database does not exist; create it (createdb) or fix DATABASE_URL"
    elif isinstance(exc, _x.InvalidPasswordError | _x.InvalidAuthorizationSpecificationError):
        hint = "the server refused the user or password; fix them in DATABASE_URL"
    elif isinstance(exc, _x.InsufficientPrivilegeError):
        hint = "the user may not create the schema or its tables; grant CREATE or migrate as owner"
    elif isinstance(exc, OSError):  # includes TimeoutError and connection refused
        hint = "cannot reach the server; is PostgreSQL running and DATABASE_URL's host right?"
    else:
        hint = str(exc)
    return StoreOpenError(f"cannot open the database {_redact(dsn)}: {hint}")
