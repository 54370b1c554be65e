"""Crash safety: SIGKILL a real process that records and compacts, then reopen the file.

``tests/crash_child.py`` records turns from several writers and compacts them, printing
each message id after ``record()`` returned. We kill it at random moments (after a random
number of output lines: mid-record, mid-summarizer call, around a commit), read what it
managed to print, and check the file: SQLite's integrity check passes, every acknowledged
turn is there exactly once, summary, facts and fold pointer agree, and the turn search
index (FTS5, kept by triggers in the same transactions) matches the turns exactly. The next run
reopens the same file, so recovery after a crash is itself killed and checked.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memory.identifiers import contains_identifier, extract_identifiers
from memory.models import ChannelKey
from memory.stores.sqlite.store import SqliteStore
from tests.harness.children import ended_sync
from tests.harness.turn_index import assert_turn_index_matches_turns

ROOT = Path(__file__).resolve().parent.parent
TRIALS = int(os.environ.get("GISTBOT_CRASH_TRIALS", "60"))


@dataclass
class Trial:
    acked: list[tuple[str, str]] = field(default_factory=list)
    mid_compaction: bool = False
    lines: int = 0


def run_and_kill(db: Path, run: int, kill_after: int) -> Trial:
    """Start the child, let it print ``kill_after`` lines, SIGKILL it, collect its acks."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.crash_child", str(db), str(run)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    trial = Trial()
    open_calls: set[str] = set()

    def take(line: bytes) -> None:
        if not line.endswith(b"\n"):
            return  # cut off by the kill: not a complete acknowledgement
        kind, *rest = line.decode().split()
        trial.lines += 1
        if kind == "A":
            trial.acked.append((rest[0], rest[1]))
        elif kind == "S":
            open_calls.add(rest[0])
        elif kind == "K":
            open_calls.discard(rest[0])

    try:
        # A resumed compaction may report (S/K lines) before the store says READY.
        while (early := proc.stdout.readline()) != b"READY\n":
            if not early.startswith((b"S ", b"K ")):
                proc.kill()
                raise AssertionError(f"child did not start: {early!r} {proc.stderr.read()!r}")
            take(early)
        trial.lines = 0
        while trial.lines < kill_after:
            line = proc.stdout.readline()
            if not line:
                break
            take(line)
        proc.send_signal(signal.SIGKILL)
        for line in proc.stdout:  # printed before it died: acknowledged as well
            take(line)
        proc.wait()
        err = proc.stderr.read().decode()
    finally:  # killed and waited whatever happened (a timeout raises inside a read)
        ended_sync(proc)
    assert proc.returncode == -signal.SIGKILL, err
    assert "Traceback" not in err, err
    trial.mid_compaction = bool(open_calls)
    return trial


def check_file(db: Path, acked: dict[tuple[str, str], int]) -> None:
    """The invariants a crash must never break, checked on the raw file."""
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        channels = conn.execute(
            "SELECT id, channel, summary, version, folded_through, next_seq, compactions "
            "FROM channels"
        ).fetchall()
        present: dict[tuple[str, str], int] = {}
        for cid, channel, summary, version, folded, next_seq, compactions in channels:
            rows = conn.execute(
                "SELECT seq, message_id, text FROM turns WHERE channel_id = ? ORDER BY seq", (cid,)
            ).fetchall()
            for _, mid, _ in rows:
                present[(channel, mid)] = present.get((channel, mid), 0) + 1
            max_seq = max((r[0] for r in rows), default=0)
            assert max_seq < next_seq
            assert 0 <= folded <= max_seq, (channel, folded, max_seq)
            assert version >= compactions
            if compactions == 0:
                assert (folded, summary) == (0, ""), channel
            else:
                assert folded > 0 and summary, channel
            facts = conn.execute(
                "SELECT value, first_seq, last_seen_seq FROM facts WHERE channel_id = ?", (cid,)
            ).fetchall()
            values = set()
            for value, first, last in facts:
                values.add(value)
                assert 1 <= first <= last <= folded, (channel, value, first, last, folded)
            # the summary and facts cover exactly what the fold pointer says was folded
            for seq, mid, text in rows:
                if seq <= folded:
                    for ident in extract_identifiers(text):
                        assert contains_identifier(summary, ident) or ident in values, (
                            channel, mid, ident,
                        )
        for key in acked:
            assert present.get(key) == 1, f"acknowledged turn {key} has {present.get(key)} copies"
        # the turn search index (written by triggers in the same transaction) agrees
        assert assert_turn_index_matches_turns(conn) == sum(present.values())
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.timeout(360)  # sixty child starts; a hang guard, scaled further under load
def test_sigkill_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("GISTBOT_CRASH_SEED", "20240611")))
    db = tmp_path / "crash.db"
    acked: dict[tuple[str, str], int] = {}
    mid_compaction = 0
    for run in range(1, TRIALS + 1):
        # mostly early kills (the interesting recovery states), sometimes long runs
        kill_after = rng.choice([rng.randint(0, 40), rng.randint(0, 400)])
        trial = run_and_kill(db, run, kill_after)
        mid_compaction += trial.mid_compaction
        for key in trial.acked:
            acked[key] = run
        check_file(db, acked)

    assert len(acked) > TRIALS  # the runs did record (and acknowledge) turns
    assert mid_compaction >= TRIALS // 10, f"only {mid_compaction} kills hit a compaction"
    final_check_through_the_store(db, acked)


def final_check_through_the_store(db: Path, acked: dict[tuple[str, str], int]) -> None:
    import asyncio

    async def check() -> None:
        async with SqliteStore(db) as store:
            for channel in {c for c, _ in acked}:
                key = ChannelKey("discord", "g", channel)
                turns = await store.turns(key, limit=10**6)
                ids = [t.message_id for t in turns]
                assert len(ids) == len(set(ids))
                assert {m for c, m in acked if c == channel} <= set(ids)
                state, pending = await store.snapshot(key, limit=10**6)
                assert pending == [t for t in turns if t.seq > state.folded_through]
                # search agrees with a scan: each turn is found by its unique order number
                for turn in turns[:: max(1, len(turns) // 50)]:
                    number = turn.text.split("ORD-")[1].split()[0]
                    found = await store.search_turns(key, [number], before_seq=10**9)
                    assert found == [turn], (turn, found)

    asyncio.run(check())
