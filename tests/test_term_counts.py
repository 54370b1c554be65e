"""Turn counts of common terms are kept between turn searches (SQLite), and only while they
are still close: a rare term, whose exact count decides whether it is searched at all, is
counted every time."""

from __future__ import annotations

from pathlib import Path

from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore
from memory.stores.sqlite.term_counts import MAX_AGE, MIN_KEPT, TermCounts

KEY = ChannelKey("discord", "g", "c")


class Counter:
    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self, term: str) -> int:
        self.calls += 1
        return self.n


def test_a_common_count_is_reused_until_the_channel_grows_by_an_eighth_of_it() -> None:
    counts, exact = TermCounts(), Counter(800)
    assert counts.get(1, 2001, "deploy", 10_000, exact) == 800
    assert counts.get(1, 2001, "deploy", 10_100, exact) == 800  # grew by 100 <= 800 / 8
    assert exact.calls == 1
    counts.get(1, 2001, "deploy", 10_101, exact)  # grew by 101: counted again
    assert exact.calls == 2
    counts.get(1, 2001, "deploy", 10_050, exact)  # an older range than the kept count's
    assert exact.calls == 3


def test_rare_terms_are_counted_every_time() -> None:
    counts, exact = TermCounts(), Counter(MIN_KEPT - 1)
    for _ in range(3):
        counts.get(1, 2001, "ORD-2041", 10_000, exact)
    assert exact.calls == 3


def test_kept_counts_are_per_channel_and_cap_expire_and_clear() -> None:
    now = [0.0]
    counts, exact = TermCounts(clock=lambda: now[0]), Counter(500)
    counts.get(1, 2001, "w", 100, exact)
    counts.get(2, 2001, "w", 100, exact)  # another channel
    counts.get(1, 501, "w", 100, exact)  # another cap (COMMON_TURN_DOCS changed)
    assert exact.calls == 3
    now[0] = MAX_AGE + 1
    counts.get(1, 2001, "w", 100, exact)
    assert exact.calls == 4
    counts.clear()
    counts.get(1, 2001, "w", 100, exact)
    assert exact.calls == 5


async def test_a_store_counts_a_common_word_once_over_many_searches(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "s.db") as store:
        for i in range(1, 301):
            text = f"deploy notes {i}" + (" ORD-2041 refund" if i == 7 else "")
            await store.record(NewTurn(KEY, f"m{i}", "user", "u", "Dana", text, 5, float(i)))
        counted = []
        for _ in range(3):
            before = store.term_counts.counted
            found = await store.search_turns(KEY, ["deploy", "ord", "2041"], before_seq=301,
                                             limit=5)
            counted.append(store.term_counts.counted - before)
            assert found[0].seq == 7  # the rare terms still find their one turn
        assert counted[0] >= 3 and counted[1] == counted[2] == counted[0] - 1
        await store.reset(KEY)
        before = store.term_counts.counted
        assert await store.search_turns(KEY, ["deploy"], before_seq=301, limit=5) == []
        assert store.term_counts.counted - before == 1  # reset forgot the kept count
