"""An archive search remembers how many facts and episodes hold each query term until the
archive is written (``memory.stores.sqlite.archive_vocab``): a reply's view no longer pays
~25 µs a term for the same counts, and a count is never used after a write, whichever
connection or process wrote."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.models import ChannelKey, NewLongTermFact
from memory.search_text import query_terms
from memory.stores.sqlite.store import SqliteStore
from tests.harness.store_contract import new_turn

KEY = ChannelKey("discord", "g1", "c1")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "vocab.db") as s:
        await s.record(new_turn(KEY, "m1", "hello"))
        yield s


async def _found(store: SqliteStore, text: str) -> list[str]:
    found = await store.search(KEY, query_terms(text), facts_limit=8, episodes_limit=4)
    return [f.text for f in found.facts]


async def test_counts_are_read_once_while_the_archive_is_not_written(store: SqliteStore) -> None:
    await store.add_fact(KEY, NewLongTermFact("the kestrel build ships on Friday"), now=1.0)
    question = "when does the kestrel build ship?"
    assert await _found(store, question) == ["the kestrel build ships on Friday"]
    looked_up = store.archive_vocab.looked_up
    assert looked_up > 0
    for _ in range(3):
        assert await _found(store, question) == ["the kestrel build ships on Friday"]
    assert store.archive_vocab.looked_up == looked_up  # no term looked up again


async def test_a_term_counted_absent_is_found_after_remember_and_gone_after_forget(
    store: SqliteStore,
) -> None:
    assert await _found(store, "what is the osprey code?") == []  # "osprey": 0, remembered
    fact = await store.add_fact(KEY, NewLongTermFact("the osprey code is ORD-4417"), now=1.0)
    assert await _found(store, "what is the osprey code?") == ["the osprey code is ORD-4417"]
    looked_up = store.archive_vocab.looked_up
    await store.delete_fact(KEY, fact.id)
    assert await _found(store, "what is the osprey code?") == []
    assert store.archive_vocab.looked_up > looked_up  # counted again after the write


async def test_a_write_by_another_store_on_the_file_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    async with SqliteStore(path) as reader, SqliteStore(path) as writer:
        await writer.record(new_turn(KEY, "m1", "hello"))
        assert await _found(reader, "the heron invoice?") == []
        await writer.add_fact(KEY, NewLongTermFact("the heron invoice is INV-88"), now=1.0)
        assert await _found(reader, "the heron invoice?") == ["the heron invoice is INV-88"]


async def test_reset_counts_as_a_write(store: SqliteStore) -> None:
    await store.add_fact(KEY, NewLongTermFact("the plover launch is in May"), now=1.0)
    assert await _found(store, "the plover launch?") == ["the plover launch is in May"]
    looked_up = store.archive_vocab.looked_up
    await store.reset(KEY)
    await store.record(new_turn(KEY, "m2", "hello again"))
    assert await _found(store, "the plover launch?") == []
    assert store.archive_vocab.looked_up > looked_up  # counted again after the reset
    await store.add_fact(KEY, NewLongTermFact("the plover launch moved to June"), now=2.0)
    assert await _found(store, "the plover launch?") == ["the plover launch moved to June"]
