"""Turns folded before their files were read, told again to the next summary
(``memory.compaction.late_turns``): marked, oldest first, within their share of one
call's input, and always at least one, so a large file cannot stall the queue."""

from __future__ import annotations

from memory.compaction import LATE_MARK, fold_cost, late_turns
from memory.models import ChannelKey, Turn
from memory.window import FOLD_TURN_OVERHEAD

KEY = ChannelKey("slack", "T1", "C1")


def turn(seq: int, tokens: int) -> Turn:
    return Turn(KEY, seq, f"m{seq}", "user", "U1", "Alice", f"notes {seq}", tokens, 1.0 + seq)


def test_late_turns_are_marked_oldest_first_within_the_bound() -> None:
    queued = [turn(3, 100), turn(7, 100), turn(9, 100)]
    told = late_turns(queued, 2 * (100 + FOLD_TURN_OVERHEAD))
    assert [t.seq for t in told] == [3, 7]
    assert [t.text for t in told] == [LATE_MARK + "notes 3", LATE_MARK + "notes 7"]
    assert fold_cost(told) == 2 * (100 + FOLD_TURN_OVERHEAD)


def test_one_late_turn_larger_than_the_bound_is_still_told() -> None:
    assert [t.seq for t in late_turns([turn(3, 5000), turn(4, 1)], 100)] == [3]
    assert late_turns([], 100) == []
