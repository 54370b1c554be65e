"""gistbot's memory errors, in one place.

::

    MemoryError_ (base: anything the memory layer raises on purpose)
    ├── StoreError            the database could not do what was asked
    │   ├── StoreOpenError    cannot open: unwritable path, corrupt file, not a gistbot db
    │   ├── SchemaTooNewError the file was written by a newer gistbot
    │   ├── StoreBusyError    locked by another writer past the busy timeout
    │   └── StoreUnavailableError  no write can succeed until the operator acts or the
    │                         server comes back: disk full, read-only, connection lost
    │                         (``cause`` names which; the store logs it once a minute)
    ├── AnsweredTurnGone      an answer not recorded: its turn was reset or deleted meanwhile
    ├── SummaryRejected       the summarizer's answer failed a check (empty, too long,
    │                         error-like, identifiers lost); the old summary stays
    ├── Preempted             the summarizer's model call gave its endpoint slot to a
    │                         reply and was cancelled; nothing changed, retried later
    └── CallRefused           a model call refused before it started (a daily token limit)

The name ends in ``_`` so it never shadows the builtin ``MemoryError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.models import ChannelKey, TurnRef

__all__ = [
    "AnsweredTurnGone",
    "CallRefused",
    "MemoryError_",
    "Preempted",
    "SchemaTooNewError",
    "StoreBusyError",
    "StoreError",
    "StoreOpenError",
    "StoreUnavailableError",
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


class StoreUnavailableError(StoreError):
    """No write can succeed for now: the disk is full, the database is read-only, or the
    server stayed unreachable through every retry. Nothing was written; acknowledge nothing.

    ``cause`` is a short stable name ("disk full", "read-only", "connection lost", …) that
    the once-a-minute report in the log is keyed by.
    """

    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(f"the database cannot store anything now ({cause}): {detail}")
        self.cause = cause


class AnsweredTurnGone(MemoryError_):
    """``record`` stored nothing: the turn the new one answers (``NewTurn.answers``) is no
    longer in the channel, forgotten by ``/reset`` or deleted while the answer was made.
    Not a store failure: the store works, and the answer must not bring the question back."""

    def __init__(self, key: ChannelKey, answers: TurnRef) -> None:
        super().__init__(f"the turn answered in {key} is gone ({answers}); nothing recorded")
        self.key = key
        self.answers = answers


class SummaryRejected(MemoryError_):
    """A summarizer answer did not pass the checks; the previous summary is kept."""


class Preempted(MemoryError_):
    """A background summary call was cancelled so that a waiting reply could use its slot
    at the model endpoint (``bot.llm.gate``). Nothing was stored; compaction retries.

    ``elapsed`` (seconds since the request started) and ``received`` (answer chunks that
    had arrived, about one token each) say how far it got, when the model client knows."""

    def __init__(
        self, message: str = "preempted by a reply", *, elapsed: float | None = None,
        received: int | None = None,
    ) -> None:
        super().__init__(message)
        self.elapsed = elapsed
        self.received = received

    def progress(self) -> str:
        """How far the call got, for a log line ("after 3.2s, 41 chunks received")."""
        if self.elapsed is None:
            return "before it started"
        got = "" if self.received is None else f", {self.received} chunks received"
        return f"after {self.elapsed:.1f}s{got}"


class CallRefused(MemoryError_):
    """A model call was refused before it was sent: the account that pays for it is over
    its daily token limit (whatever meters the calls raises it; ``memory`` only reacts).
    Nothing was sent or stored; compaction waits and tries again, a command answers with the
    notice."""
