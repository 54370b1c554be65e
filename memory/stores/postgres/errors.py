"""How ``PostgresStore`` reads asyncpg's errors: which ones are a lost connection (retried
with backoff on a fresh connection), which mean busy, which mean no write can succeed for
now (disk full, read-only: ``StoreUnavailableError``, reported once a minute), and what an
open failure tells the operator to fix."""

from __future__ import annotations

from urllib.parse import urlsplit

import asyncpg

from memory.errors import StoreBusyError, StoreError, StoreOpenError
from memory.stores.faults import unavailable

__all__ = ["LOST", "OPEN_FAILURES", "RETRY_DELAYS", "lost", "open_error", "translate"]

_x = asyncpg.exceptions
LOST: tuple[type[BaseException], ...] = (
    _x.PostgresConnectionError,  # includes ConnectionDoesNotExistError
    _x.InterfaceError,
    _x.AdminShutdownError,  # pg_terminate_backend, server restart
    _x.CrashShutdownError,
    _x.CannotConnectNowError,
    _x.DeadlockDetectedError,  # PostgreSQL rolled the transaction back: retrying is safe
    # "cannot switch to state …": the protocol met a connection killed mid-operation
    # (pg_terminate_backend); the connection is unusable, the server may be fine
    _x.InternalClientError,
    ConnectionError,
    TimeoutError,  # connecting to a server that is restarting
)
"""Errors after which an operation is retried on a fresh connection."""
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
"""Seconds to wait before each retry after a lost connection (3.15 s in all: a restarting
server has time to come back, and a Slack delivery is answered within its 3 seconds or
delivered again)."""
_UNAVAILABLE: tuple[tuple[type[BaseException], str], ...] = (
    (_x.DiskFullError, "disk full"),
    (_x.OutOfMemoryError, "out of memory"),
    (_x.TooManyConnectionsError, "too many connections"),
    (_x.ReadOnlySQLTransactionError, "read-only"),  # a standby, or default_transaction_read_only
    (_x.InsufficientResourcesError, "insufficient resources"),
)
_BUSY = (
    _x.LockNotAvailableError,
    _x.DeadlockDetectedError,
    _x.SerializationError,
    _x.QueryCanceledError,
)
OPEN_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError)


def lost(exc: BaseException) -> StoreError:
    """The error for a connection still lost after every retry (reported once a minute)."""
    return unavailable("connection lost", exc)


def translate(exc: BaseException) -> StoreError:
    """The ``memory.errors`` class for an asyncpg error, keeping the cause; disk full and
    read-only become ``StoreUnavailableError`` (reported once a minute per cause)."""
    for kind, cause in _UNAVAILABLE:
        if isinstance(exc, kind):
            return unavailable(cause, exc)
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
