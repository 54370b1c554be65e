"""How ``PostgresStore`` reads asyncpg's errors: which ones are a lost connection (retried
once), which mean busy, and what an open failure tells the operator to fix."""

from __future__ import annotations

from urllib.parse import urlsplit

import asyncpg

from memory.errors import StoreBusyError, StoreError, StoreOpenError

__all__ = ["LOST", "OPEN_FAILURES", "open_error", "translate"]

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
