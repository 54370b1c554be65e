"""gistbot's memory errors, in one place.

::

    MemoryError_ (base: anything the memory layer raises on purpose)
    ├── StoreError            the database could not do what was asked
    │   ├── StoreOpenError    cannot open: unwritable path, corrupt file, not a gistbot db
    │   ├── SchemaTooNewError the file was written by a newer gistbot
    │   └── StoreBusyError    locked by another writer past the busy timeout
    ├── SummaryRejected       the summarizer's answer failed a check (empty, too long,
    │                         error-like, identifiers lost); the old summary stays
    └── Preempted             the summarizer's model call gave its endpoint slot to a
                              reply and was cancelled; nothing changed, retried later

The name ends in ``_`` so it never shadows the builtin ``MemoryError``.
"""

from __future__ import annotations

__all__ = [
    "MemoryError_",
    "Preempted",
    "SchemaTooNewError",
    "StoreBusyError",
    "StoreError",
    "StoreOpenError",
    "SummaryRejected",
]


class MemoryError_(Exception):
    """Base class of every error the memory layer raises deliberately."""


class StoreError(MemoryError_):
    """The store could not complete an operation; nothing was half-written."""


class StoreOpenError(StoreError):
    """The database cannot be opened; the message says what to fix."""


class SchemaTooNewError(StoreOpenError):
    """The database was created by a newer gistbot; refuse rather than corrupt it."""


class StoreBusyError(StoreError):
    """Another writer held the database lock for longer than the busy timeout."""


class SummaryRejected(MemoryError_):
    """A summarizer answer did not pass the checks; the previous summary is kept."""


class Preempted(MemoryError_):
    """A background summary call was cancelled so that a waiting reply could use its slot
    at the model endpoint (``bot.llm_gate``). Nothing was stored; compaction retries."""
