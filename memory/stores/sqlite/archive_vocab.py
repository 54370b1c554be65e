"""How many archived items hold a term, remembered until the archive is written (SQLite).

An archive search (``archive.search``) keeps the query's rarest terms, so it first asks the
``fts5vocab`` tables of the facts' and the episodes' indexes how many items hold each of
them. Each lookup costs the same whatever the term (FTS5 opens a cursor on its index for
it), and a reply's query has ~30 terms: more than the searches themselves, on a reader
thread that competes with the turn search for the GIL (docs/decisions/0003).

The archive changes far less often than replies read it: only a compaction, ``/remember``,
``/forget``, ``/reset``, retention and copy-db write it. Triggers on ``episodes`` and
``memory_facts`` (schema step 12) count those writes in ``archive_writes``, in the writing
transaction, so a reader sees the count that matches the index it reads, whichever process
wrote. A kept count is used only while the table's write count is the one it was read
with: the counts are exact, never stale.

One instance per store; reads run on the readers' threads, hence the lock (held for the
dictionary operations only, never while reading).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

__all__ = ["MAX_ENTRIES", "ArchiveVocab"]

MAX_ENTRIES = 50_000
"""Terms kept per table at most (all are dropped when there are more)."""

_TABLES = {"memory_facts_vocab": "memory_facts", "episodes_vocab": "episodes"}


class ArchiveVocab:
    """Per vocabulary table: term -> (the table's write count, items holding the term)."""

    def __init__(self) -> None:
        self._kept: dict[str, dict[str, tuple[int, int]]] = {v: {} for v in _TABLES}
        self._lock = threading.Lock()
        self.looked_up = 0
        """Terms looked up in a vocabulary table (for tests: reuse shows as fewer)."""

    def counts(self, conn: sqlite3.Connection, vocab: str, query: Sequence[str]
               ) -> dict[str, int]:
        """How many items of ``vocab``'s table hold each term of ``query`` (0: none), read
        in ``conn``'s current transaction."""
        (writes,) = conn.execute(
            "SELECT n FROM archive_writes WHERE name = ?", (_TABLES[vocab],)
        ).fetchone()
        out: dict[str, int] = {}
        with self._lock:
            kept = self._kept[vocab]
            for term in query:
                hit = kept.get(term)
                if hit is not None and hit[0] == writes:
                    out[term] = hit[1]
        missing = [t for t in dict.fromkeys(query) if t not in out]
        if not missing:
            return out
        marks = ",".join("?" * len(missing))
        found = dict(conn.execute(
            f"SELECT term, doc FROM {vocab} WHERE term IN ({marks})", tuple(missing)))
        with self._lock:
            self.looked_up += len(missing)
            if len(kept) + len(missing) > MAX_ENTRIES:
                kept.clear()
            for term in missing:
                out[term] = n = int(found.get(term, 0))
                kept[term] = (writes, n)
        return out
