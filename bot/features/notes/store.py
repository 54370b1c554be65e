"""Where personal notes are kept: the ``notes`` storage role, on SQLite and PostgreSQL.

A note belongs to one person on one server or workspace (``Person``) and is numbered per
person from 1, so ``/aboutme forget 2`` names it the same way after ``copy-db``. ``add`` checks
the cap and numbers the note in one transaction (PostgreSQL: under an advisory lock per
person, so two writes at once never take one number or pass the cap); the same text twice is
the same note, so a retry after a lost answer keeps one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from bot.stores.schema import Ladder, Step
from bot.stores.sql import numbered
from memory.models import ChannelKey
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.writer import WriteTx

__all__ = ["LADDER", "Added", "Note", "NotesStore", "Person", "PostgresNotes", "SqliteNotes",
           "copy_notes", "export_notes"]


@dataclass(frozen=True, slots=True)
class Person:
    """Someone on one server or workspace of one platform."""

    platform: str
    workspace: str
    user_id: str

    @classmethod
    def of(cls, key: ChannelKey, user_id: str) -> Person:
        """The person ``user_id`` on the server of channel ``key``."""
        return cls(key.platform, key.workspace, user_id)


@dataclass(frozen=True, slots=True)
class Note:
    """One note: whose, its number for that person, its text and when it was kept."""

    person: Person
    n: int
    text: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Added:
    """What ``add`` did: the note (None: the person has the most notes allowed already) and
    whether it is new (False: the same text was kept before)."""

    note: Note | None
    new: bool = False


@runtime_checkable
class NotesStore(Protocol):
    """Personal notes (``personal_notes`` table)."""

    async def add(self, person: Person, text: str, *, now: float, cap: int) -> Added:
        """Keep ``text`` for ``person`` unless they have ``cap`` notes already."""

    async def notes(self, person: Person) -> list[Note]:
        """The person's notes, by number."""

    async def forget(self, person: Person, n: int | None) -> int:
        """Delete note ``n`` of ``person`` (None: all of theirs); how many were deleted."""

    async def server_notes(self, platform: str, workspace: str) -> list[Note]:
        """Every note kept on one server or workspace (``export``)."""

    async def all_notes(self) -> list[Note]:
        """Every note (``copy-db``)."""

    async def import_notes(self, notes: Sequence[Note]) -> None:
        """Replace every note with ``notes`` (``copy-db``)."""


LADDER = Ladder("notes", (
    Step(
        sqlite="""
        CREATE TABLE IF NOT EXISTS personal_notes (
            platform TEXT NOT NULL, workspace TEXT NOT NULL, user_id TEXT NOT NULL,
            n INTEGER NOT NULL, text TEXT NOT NULL, created_at REAL NOT NULL,
            PRIMARY KEY (platform, workspace, user_id, n)
        ) WITHOUT ROWID;
        """,
        postgres="""
        CREATE TABLE IF NOT EXISTS personal_notes (
            platform text NOT NULL, workspace text NOT NULL, user_id text NOT NULL,
            n integer NOT NULL, text text NOT NULL, created_at double precision NOT NULL,
            PRIMARY KEY (platform, workspace, user_id, n)
        );
        """,
        marker=("personal_notes", "n"),
    ),
))

_COLS = "platform, workspace, user_id, n, text, created_at"
OF_PERSON = (f"SELECT {_COLS} FROM personal_notes WHERE platform = ? AND workspace = ? "
             "AND user_id = ? ORDER BY n")
OF_SERVER = (f"SELECT {_COLS} FROM personal_notes WHERE platform = ? AND workspace = ? "
             "ORDER BY user_id, n")
ALL = f"SELECT {_COLS} FROM personal_notes ORDER BY platform, workspace, user_id, n"
INSERT = f"INSERT INTO personal_notes ({_COLS}) VALUES (?, ?, ?, ?, ?, ?)"
FORGET_ONE = ("DELETE FROM personal_notes WHERE platform = ? AND workspace = ? "
              "AND user_id = ? AND n = ?")
FORGET_ALL = "DELETE FROM personal_notes WHERE platform = ? AND workspace = ? AND user_id = ?"
LOCK = ("SELECT pg_advisory_xact_lock(hashtextextended("
        "'gistbot:notes:' || $1 || ':' || $2 || ':' || $3, 0))")


def _note(r: Sequence[Any]) -> Note:
    return Note(Person(r[0], r[1], r[2]), int(r[3]), r[4], float(r[5]))


def _row(note: Note) -> tuple[Any, ...]:
    p = note.person
    return p.platform, p.workspace, p.user_id, note.n, note.text, note.created_at


def _who(person: Person) -> tuple[str, str, str]:
    return person.platform, person.workspace, person.user_id


def _decide(person: Person, held: list[Note], text: str, now: float, cap: int
            ) -> tuple[Added, Note | None]:
    """What ``add`` answers, and the note to insert (None: nothing)."""
    for note in held:
        if note.text == text:
            return Added(note), None
    if len(held) >= cap:
        return Added(None), None
    note = Note(person, max((n.n for n in held), default=0) + 1, text, now)
    return Added(note, new=True), note


# ---------------------------------------------------------------------------- SQLite


def _add(tx: WriteTx, person: Person, text: str, now: float, cap: int) -> Added:
    held = [_note(r) for r in tx.conn.execute(OF_PERSON, _who(person)).fetchall()]
    added, insert = _decide(person, held, text, now, cap)
    if insert is not None:
        tx.conn.execute(INSERT, _row(insert))
    return added


def _forget(tx: WriteTx, person: Person, n: int | None) -> int:
    cur = (tx.conn.execute(FORGET_ALL, _who(person)) if n is None
           else tx.conn.execute(FORGET_ONE, (*_who(person), n)))
    return max(cur.rowcount, 0)


def _select(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> list[Note]:
    return [_note(r) for r in conn.execute(sql, args).fetchall()]


def _import(tx: WriteTx, notes: tuple[Note, ...]) -> None:
    tx.conn.execute("DELETE FROM personal_notes")
    tx.conn.executemany(INSERT, [_row(n) for n in notes])


class SqliteNotes:
    """``NotesStore`` on a ``SqliteStore``'s writer and readers."""

    def __init__(self, db: SqliteStore) -> None:
        self.db = db

    async def add(self, person: Person, text: str, *, now: float, cap: int) -> Added:
        """See ``NotesStore.add``."""
        return await self.db.write(_add, person, text, now, cap)

    async def notes(self, person: Person) -> list[Note]:
        """See ``NotesStore.notes``."""
        return await self.db.read(_select, OF_PERSON, _who(person))

    async def forget(self, person: Person, n: int | None) -> int:
        """See ``NotesStore.forget``."""
        return await self.db.write(_forget, person, n)

    async def server_notes(self, platform: str, workspace: str) -> list[Note]:
        """See ``NotesStore.server_notes``."""
        return await self.db.read(_select, OF_SERVER, (platform, workspace))

    async def all_notes(self) -> list[Note]:
        """See ``NotesStore.all_notes``."""
        return await self.db.read(_select, ALL, ())

    async def import_notes(self, notes: Sequence[Note]) -> None:
        """See ``NotesStore.import_notes``."""
        await self.db.write(_import, tuple(notes))


# ---------------------------------------------------------------------------- PostgreSQL


class PostgresNotes:
    """``NotesStore`` on a ``PostgresStore``'s pool (the same statements, numbered)."""

    def __init__(self, db: Any) -> None:
        self.db = db

    async def add(self, person: Person, text: str, *, now: float, cap: int) -> Added:
        """See ``NotesStore.add``."""

        async def run(conn: Any) -> Added:
            await conn.execute(LOCK, *_who(person))
            held = [_note(r) for r in await conn.fetch(numbered(OF_PERSON), *_who(person))]
            added, insert = _decide(person, held, text, now, cap)
            if insert is not None:
                await conn.execute(numbered(INSERT), *_row(insert))
            return added

        result: Added = await self.db.tx(run)
        return result

    async def notes(self, person: Person) -> list[Note]:
        """See ``NotesStore.notes``."""
        return [_note(r) for r in await self.db.fetch(numbered(OF_PERSON), *_who(person))]

    async def forget(self, person: Person, n: int | None) -> int:
        """See ``NotesStore.forget``."""

        async def run(conn: Any) -> int:
            if n is None:
                status = await conn.execute(numbered(FORGET_ALL), *_who(person))
            else:
                status = await conn.execute(numbered(FORGET_ONE), *_who(person), n)
            return int(str(status).rsplit(" ", 1)[-1] or 0)

        result: int = await self.db.tx(run)
        return result

    async def server_notes(self, platform: str, workspace: str) -> list[Note]:
        """See ``NotesStore.server_notes``."""
        return [_note(r) for r in await self.db.fetch(numbered(OF_SERVER), platform, workspace)]

    async def all_notes(self) -> list[Note]:
        """See ``NotesStore.all_notes``."""
        return [_note(r) for r in await self.db.fetch(ALL)]

    async def import_notes(self, notes: Sequence[Note]) -> None:
        """See ``NotesStore.import_notes``."""

        async def run(conn: Any) -> None:
            await conn.execute("DELETE FROM personal_notes")
            await conn.executemany(numbered(INSERT), [_row(n) for n in notes])

        await self.db.tx(run)


# ---------------------------------------------------------------------------- copy-db, export


async def copy_notes(source: NotesStore, target: NotesStore) -> bool:
    """Every note from ``source`` to ``target`` (replacing the target's), numbers kept;
    True when the target then holds exactly the source's notes."""
    notes = await source.all_notes()
    await target.import_notes(notes)
    return await target.all_notes() == notes


async def export_notes(store: NotesStore, key: ChannelKey) -> list[dict[str, object]]:
    """``export``'s lines for the notes kept on the server of ``key``'s channel."""
    rows: list[dict[str, object]] = []
    for note in await store.server_notes(key.platform, key.workspace):
        rows.append({"type": "personal_note", "user_id": note.person.user_id, "n": note.n,
                     "text": note.text, "created_at": note.created_at})
    return rows
