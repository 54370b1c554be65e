"""``MemoryManager`` on a real ``SqliteStore`` with scripted summary models.

What is pinned here: single-flight compaction with hysteresis under concurrent records, a
reply path that never waits for the summarizer, failures that keep the old state and are
retried, ``reset``/edits voiding a compaction in flight, ``digest`` storing nothing, a
harmless ``close``, retention, and (as a hypothesis property) that no recorded turn is
ever lost or duplicated whatever records and compactions interleave.
"""

from __future__ import annotations

import asyncio
import functools
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.compaction import Views
from memory.config import MemoryConfig
from memory.identifiers import contains_identifier, extract_identifiers
from memory.manager import MemoryManager
from memory.models import ChannelKey, NewTurn
from memory.store import Store
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.summary_prompt import SummaryRequest
from memory.text import clean_text
from memory.tokens import TokenCounter
from memory.window import FOLD_TURN_OVERHEAD, WindowPolicy
from tests.fakes.models import Block, ExtractiveModel, ScriptedModel, extractive

KEY = ChannelKey("discord", "g1", "c1")
OTHER = ChannelKey("discord", "g1", "c2")
AUTHORS = ["Alice", "Bob", "민수", "Carol"]


def say(i: int, text: str | None = None, key: ChannelKey = KEY, *, sent_at: float = 1000.0,
        mid: str | None = None) -> NewTurn:
    author = AUTHORS[i % len(AUTHORS)]
    return NewTurn(key, mid or f"m{i}", "user", author.lower(), author,
                   text if text is not None else f"message number {i} from {author}.",
                   0, sent_at + i)


class SpyStore:
    """Delegates to a real store; records commits and signals retention passes."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.commits: list[tuple[ChannelKey, int, bool]] = []
        self.purged = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit_summary(self, key: ChannelKey, **kw: Any) -> bool:
        ok = await self.inner.commit_summary(key, **kw)
        self.commits.append((key, kw["folded_through"], ok))
        return ok

    async def purge_folded_before(self, cutoff: float) -> int:
        n = await self.inner.purge_folded_before(cutoff)
        self.purged.set()
        return n


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SpyStore]:
    inner = SqliteStore(tmp_path / "memory.db", synchronous="OFF")
    await inner.open()
    yield SpyStore(inner)
    await inner.close()


MakeManager = Callable[..., MemoryManager]


@pytest.fixture
async def make_manager(
    store: SpyStore, tok: TokenCounter
) -> AsyncIterator[MakeManager]:
    made: list[MemoryManager] = []

    def make(model: Any, *, timeout: float = 30.0, summary_tokens: int = 300,
             policy: WindowPolicy | None = None, clock: Callable[[], float] = time.time,
             **kw: Any) -> MemoryManager:
        summarizer = Summarizer(model, tok, summary_tokens=summary_tokens, timeout=timeout)
        kw.setdefault("retry_base", 0.01)
        mgr = MemoryManager(store, summarizer, tok, policy,  # type: ignore[arg-type]
                            config=MemoryConfig(**kw), clock=clock)
        made.append(mgr)
        return mgr

    yield make
    for mgr in made:
        await mgr.close(grace=0)


async def record_all(mgr: MemoryManager, turns: list[NewTurn]) -> None:
    for t in turns:
        await mgr.record(t)


async def finishes_while(blocked: Block, aw: Awaitable[Any]) -> Any:
    """Run ``aw`` while ``blocked`` holds the summarizer; fail if ``aw`` waits for it.

    The 10 s bound only turns a deadlock into a clear failure; nothing here is slow.
    """
    task = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait({task}, timeout=10)
    assert task in done, "the call waited for the blocked summarizer"
    assert not blocked.release.is_set()
    return task.result()


# ---------------------------------------------------------------------------- single flight


async def test_fifty_concurrent_records_make_one_summarizer_call(
    make_manager: MakeManager, store: SpyStore, tok: TokenCounter
) -> None:
    model = ExtractiveModel(tok)
    mgr = make_manager(model)
    results = await asyncio.gather(*(mgr.record(say(i)) for i in range(50)))
    assert all(r.created for r in results)
    await mgr.wait_idle()

    assert model.max_in_flight == 1
    assert model.calls == 1 == len(store.commits)
    assert store.commits == [(KEY, results[45].turn.seq, True)]  # 46 folded, 4 kept
    turns = await store.turns(KEY)
    assert sorted(t.message_id for t in turns) == sorted(f"m{i}" for i in range(50))
    assert [t.message_id for t in await store.pending(KEY)] == [
        r.turn.message_id for r in sorted(results, key=lambda r: r.turn.seq)[-4:]
    ]


async def test_compaction_checks_the_size_read_with_the_record_not_a_read_of_its_own(
    make_manager: MakeManager, store: SpyStore, tok: TokenCounter
) -> None:
    """The reply path's records carry the unfolded size from their own transaction: no
    ``pending_size`` read follows them, and a channel over the window is still compacted
    (and one under it left alone)."""
    reads: list[ChannelKey] = []
    pending_size = store.inner.pending_size

    async def counted(key: ChannelKey) -> tuple[int, int]:
        reads.append(key)
        return await pending_size(key)

    store.pending_size = counted  # type: ignore[method-assign]
    model = ExtractiveModel(tok)
    mgr = make_manager(model, policy=WindowPolicy(max_messages=10, keep_messages=4))
    await record_all(mgr, [say(i) for i in range(10)])
    await mgr.wait_idle()
    assert reads == [] and model.calls == 0  # at the window, not over it: nothing read
    await mgr.record(say(10))
    await mgr.wait_idle()
    assert model.calls == 1 and len(store.commits) == 1  # over it: compacted
    assert reads == [KEY]  # only the compaction's own look after its commit
    assert await store.pending_size(KEY) == (4, sum(t.tokens for t in await store.pending(KEY)))


async def test_records_during_a_compaction_make_one_more_call_per_overflow(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    first = Block(asyncio.Event(), extractive(tok))
    second = Block(asyncio.Event(), extractive(tok))
    model = scripted(first, second)  # a third call would fail the test
    mgr = make_manager(model)

    await asyncio.gather(*(mgr.record(say(i)) for i in range(50)))
    await first.entered.wait()
    wave = asyncio.gather(*(mgr.record(say(i)) for i in range(50, 100)))
    wave2 = await finishes_while(first, wave)
    assert all(r.created for r in wave2)
    assert model.in_flight == 1
    first.release.set()
    await second.entered.wait()
    assert model.in_flight == 1
    second.release.set()
    await mgr.wait_idle()

    assert model.max_in_flight == 1
    # each call folded far more than the minimum of max - keep + 1 = 7 turns
    folded = [through for _, through, ok in store.commits if ok]
    assert len(folded) == 2
    assert folded[0] >= 7 and folded[1] - folded[0] >= 7
    assert len(model.requests[0].blocks) >= 7
    turns = await store.turns(KEY)
    assert len(turns) == 100 and len({t.message_id for t in turns}) == 100
    assert len(await store.pending(KEY)) == 4


async def test_channels_compact_independently(
    make_manager: MakeManager, store: SpyStore, tok: TokenCounter
) -> None:
    model = ExtractiveModel(tok)
    mgr = make_manager(model)
    keys = [ChannelKey("slack", "T", f"C{i}") for i in range(5)]
    await asyncio.gather(*(mgr.record(say(i, key=k)) for i in range(11) for k in keys))
    await mgr.wait_idle()
    assert model.calls == 5
    assert sorted(k for k, _, ok in store.commits if ok) == sorted(keys)
    for k in keys:
        assert len(await store.pending(k)) == 4


async def test_compact_now_is_single_flight_too(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    """A forced compaction (context overflow) must not run beside a background one."""
    forced = Block(asyncio.Event(), extractive(tok))
    model = scripted(forced, extractive(tok))
    mgr = make_manager(model)
    await record_all(mgr, [say(i) for i in range(6)])  # under the trigger
    job = asyncio.ensure_future(mgr.compact_now(KEY, force=True))
    await forced.entered.wait()
    await record_all(mgr, [say(i) for i in range(6, 20)])  # overflows meanwhile
    assert model.in_flight == 1
    forced.release.set()
    assert await job
    await mgr.wait_idle()
    assert model.max_in_flight == 1
    assert [ok for _, _, ok in store.commits] == [True, True]
    assert len(await store.pending(KEY)) <= 10


# ---------------------------------------------------------------------------- reply path


async def test_reply_path_never_awaits_compaction(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    blocked = Block(asyncio.Event(), extractive(tok))
    mgr = make_manager(scripted(blocked))
    await record_all(mgr, [say(i) for i in range(11)])
    await blocked.entered.wait()
    assert mgr.busy(KEY)

    view = await finishes_while(blocked, mgr.view(KEY, 4000))
    assert [t.message_id for t in view.turns] == [f"m{i}" for i in range(11)]
    assert view.summary == ""
    res = await finishes_while(blocked, mgr.record(say(11)))
    assert res.created
    view = await finishes_while(blocked, mgr.view(KEY, 4000))
    assert len(view.turns) == 12
    stats = await finishes_while(blocked, mgr.stats(KEY))
    assert (stats.turns, stats.pending) == (12, 12)

    blocked.release.set()
    await mgr.wait_idle()
    view = await mgr.view(KEY, 4000)
    # the compaction read 11 turns and folded 7; the 12th arrived meanwhile and stays
    assert view.summary and [t.message_id for t in view.turns] == [f"m{i}" for i in range(7, 12)]


async def test_view_never_exceeds_budget_when_compaction_lags(
    make_manager: MakeManager, scripted: Callable[..., ScriptedModel], tok: TokenCounter
) -> None:
    blocked = Block(asyncio.Event(), extractive(tok))
    mgr = make_manager(scripted(blocked, extractive(tok)))  # the second call catches up
    await record_all(mgr, [say(i, "긴 메시지 " * 30) for i in range(40)])
    await blocked.entered.wait()
    view = await mgr.view(KEY, 500)
    assert view.tokens <= 500
    assert view.dropped > 0 and view.turns[-1].message_id == "m39"
    assert len(await mgr.store.pending(KEY)) == 40  # dropped from the prompt only
    blocked.release.set()
    await mgr.wait_idle()


# ---------------------------------------------------------------------------- failures

# An over-long answer is no failure: it is trimmed and committed (tests/test_summary_bound.py).
FAILURES: dict[str, Any] = {
    "raises": RuntimeError("model exploded"),
    "connection": ConnectionResetError("peer reset"),
    "empty": "   \n ",
    "think-only": "<think>I should summarize</think>",
    "error-text": "Error: upstream returned 500",
    "apology": "I'm sorry, but I can't help with that.",
    "html-error-page": "<!DOCTYPE html><html><body>502 Bad Gateway</body></html>",
    "json-error": '{"error": {"message": "insufficient_quota"}}',
}


@pytest.mark.parametrize("failure", [*FAILURES, "timeout"])
async def test_failed_compaction_keeps_old_state_and_retries(
    failure: str, make_manager: MakeManager, store: SpyStore,
    scripted: Callable[..., ScriptedModel], tok: TokenCounter,
) -> None:
    retry = Block(asyncio.Event(), extractive(tok))
    if failure == "timeout":
        bad: Any = Block(asyncio.Event(), "too late")  # never released: the call times out
        # the summarizer's timeout applies to every call, so the retry cannot be held open;
        # the commit log shows nothing was written in between instead
        model = scripted(extractive(tok), bad, extractive(tok))
    else:
        model = scripted(extractive(tok), FAILURES[failure], retry)
    mgr = make_manager(model, timeout=0.5 if failure == "timeout" else 30.0)

    await record_all(mgr, [say(i) for i in range(11)])
    await mgr.wait_idle()
    good_state = await store.state(KEY)
    assert good_state.folded_through == 7 and good_state.text

    await record_all(mgr, [say(i) for i in range(11, 18)])  # overflow again
    if failure != "timeout":
        await retry.entered.wait()  # the failure happened; the retry is in flight
        assert mgr.compaction_failures == 1
        assert await store.state(KEY) == good_state  # old state kept
        assert len(await store.turns(KEY)) == 18
        retry.release.set()
    await mgr.wait_idle()
    assert mgr.compaction_failures == 1
    assert store.commits == [(KEY, 7, True), (KEY, 14, True)]  # nothing between
    final = await store.state(KEY)
    assert final.version > good_state.version and final.folded_through == 14
    for junk in ("model exploded", "Error", "sorry", "DOCTYPE", "insufficient_quota",
                 "too late", "a very long line", "think"):
        assert junk not in final.text
    assert model.calls == 3


async def test_failures_back_off_and_do_not_touch_other_channels(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    release = Block(asyncio.Event(), extractive(tok))
    model = scripted(RuntimeError("1"), RuntimeError("2"), RuntimeError("3"), release,
                     extractive(tok))
    mgr = make_manager(model)
    await record_all(mgr, [say(i) for i in range(11)])
    await release.entered.wait()
    assert mgr.compaction_failures == 3
    await record_all(mgr, [say(i, key=OTHER) for i in range(11)])  # compacts meanwhile
    release.release.set()
    await mgr.wait_idle()
    assert sorted(k for k, _, ok in store.commits if ok) == sorted([KEY, OTHER])


async def test_identifier_dropping_summary_carries_facts(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel]
) -> None:
    dropped = "## Topics\n- Alice asked about her order; Bob will look into it."
    model = scripted(dropped, dropped)  # the retry drops them again
    mgr = make_manager(model)
    texts = ["My order ORD-7731 is late.", "Ticket INC0012345 is open.",
             "See https://status.example.com/x and mail ops@example.com",
             "The build `blue-fox` failed at 12,500 items."] + ["ok"] * 7
    await record_all(mgr, [say(i, t) for i, t in enumerate(texts)])
    await mgr.wait_idle()
    assert model.calls == 2
    asked = model.requests[1].missing
    planted = ["ORD-7731", "INC0012345", "https://status.example.com/x", "ops@example.com",
               "blue-fox", "12,500"]
    assert all(p in asked for p in planted)
    state = await store.state(KEY)
    assert state.text == dropped
    values = {f.value for f in state.facts}
    assert set(planted) <= values
    # a fact says where it came from
    fact = next(f for f in state.facts if f.value == "ORD-7731")
    assert "ORD-7731" in fact.context and "Alice" in fact.context


# ---------------------------------------------------------------------------- reset, edits


async def test_reset_during_compaction_discards_its_result(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    blocked = Block(asyncio.Event(), extractive(tok))
    model = scripted(blocked)
    mgr = make_manager(model)
    await record_all(mgr, [say(i) for i in range(11)])
    await blocked.entered.wait()
    result = await mgr.reset(KEY)
    assert (result.turns, result.had_summary) == (11, False)
    blocked.release.set()
    await mgr.wait_idle()
    assert model.in_flight == 0 and not mgr.busy(KEY)
    state = await store.state(KEY)
    assert (state.text, state.facts) == ("", ())
    assert await store.turns(KEY) == [] and store.commits == []
    # the channel works again afterwards, from empty
    await record_all(mgr, [say(i, mid=f"new{i}") for i in range(3)])
    view = await mgr.view(KEY, 4000)
    assert [t.message_id for t in view.turns] == ["new0", "new1", "new2"] and not view.summary


async def test_reset_by_another_process_voids_the_commit(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    """A reset the manager does not know about (another replica) still wins: the commit
    is conditional on the version read before summarizing."""
    blocked = Block(asyncio.Event(), extractive(tok))
    mgr = make_manager(scripted(blocked))
    await record_all(mgr, [say(i) for i in range(11)])
    await blocked.entered.wait()
    await store.inner.reset(KEY)
    blocked.release.set()
    await mgr.wait_idle()
    assert store.commits == [(KEY, 7, False)]
    state = await store.state(KEY)
    assert state.text == "" and await store.turns(KEY) == []
    assert mgr.compactions == 0


async def test_edit_during_compaction_is_not_lost(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    blocked = Block(asyncio.Event(), extractive(tok))
    model = scripted(blocked, extractive(tok))
    mgr = make_manager(model)
    await record_all(mgr, [say(i) for i in range(11)])
    await blocked.entered.wait()
    assert await mgr.edit(KEY, "m2", "corrected: the order is ORD-9999.") == "updated"
    blocked.release.set()
    await mgr.wait_idle()
    assert [ok for _, _, ok in store.commits] == [False, True]  # stale, then redone
    assert any("ORD-9999" in text for _, text in model.requests[1].blocks)
    state = await store.state(KEY)
    assert contains_identifier(state.text, "ORD-9999") or "ORD-9999" in {
        f.value for f in state.facts
    }


async def test_edit_and_delete_of_unfolded_and_folded_turns(
    make_manager: MakeManager, store: SpyStore, tok: TokenCounter
) -> None:
    mgr = make_manager(ExtractiveModel(tok))
    await record_all(mgr, [say(i) for i in range(11)])
    await mgr.wait_idle()  # m0..m6 folded, m7..m10 pending
    assert await mgr.edit(KEY, "m9", "edited\x00 with a NUL") == "updated"
    (m9,) = [t for t in await store.pending(KEY) if t.message_id == "m9"]
    assert m9.text == "edited\ufffd with a NUL" and m9.tokens == tok.count(m9.text)
    assert await mgr.delete(KEY, "m10") == "deleted"
    assert await mgr.edit(KEY, "m1", "rewrite history") == "folded"
    assert await mgr.delete(KEY, "m0") == "folded"
    assert await mgr.edit(KEY, "nope", "x") == "missing"
    assert await mgr.delete(KEY, "nope") == "missing"
    ids = [t.message_id for t in await store.turns(KEY)]
    assert ids == [f"m{i}" for i in range(10)]


# ---------------------------------------------------------------------------- record input


async def test_record_cleans_text_counts_tokens_and_is_idempotent(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel]
) -> None:
    mgr = make_manager(scripted())  # no model call expected
    raw = say(1, "hi\x00 \ud83d there 🚀 안녕")
    first = await mgr.record(raw)
    assert first.created
    assert first.turn.text == clean_text(raw.text) == "hi\ufffd \ufffd there 🚀 안녕"
    assert first.turn.tokens == mgr.tokenizer.count(first.turn.text) > 0
    again = await mgr.record(raw)
    assert not again.created and again.turn == first.turn
    for i, text in enumerate(["", "   ", "x" * 1_000_000]):
        assert (await mgr.record(say(10 + i, text))).created
    assert len(await store.turns(KEY)) == 4
    view = await mgr.view(KEY, 2000)
    assert view.tokens <= 2000 and view.truncated


async def test_blank_turns_fold_without_a_model_call(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    """Attachment-only messages have no text; summarizing them would return nothing (and
    be rejected forever), so they fold under the unchanged summary without a call."""
    model = scripted(extractive(tok))
    mgr = make_manager(model)
    await record_all(mgr, [say(i, "" if i % 2 else "  \n") for i in range(11)])
    await mgr.wait_idle()
    state = await store.state(KEY)
    assert (state.folded_through, state.text) == (7, "")
    await record_all(mgr, [say(i, "the deploy is at 14:30 on `prod-eu`.") for i in range(11, 18)])
    await mgr.wait_idle()
    state = await store.state(KEY)
    assert state.folded_through == 14 and "prod-eu" in state.text
    assert model.calls == 1 and mgr.compaction_failures == 0


# ---------------------------------------------------------------------------- digest


async def test_digest_changes_nothing(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    model = scripted(extractive(tok), "## Topics\n- the digest")
    mgr = make_manager(model)
    await asyncio.gather(*(mgr.record(say(i)) for i in range(13)))  # one batch: fold 9
    await mgr.wait_idle()
    before = (await store.state(KEY), await store.turns(KEY), await store.stats(KEY))
    digest = await mgr.digest(KEY)
    assert (digest.text, digest.fresh, digest.empty) == ("## Topics\n- the digest", True, False)
    assert model.purposes == ["summary", "digest"]
    request: SummaryRequest = model.requests[-1]
    assert request.digest and request.previous == before[0].text
    assert [t for _, t in request.blocks] == [t.text for t in await store.pending(KEY)]
    assert (digest.stats.turns, digest.stats.folded, digest.stats.pending) == (13, 9, 4)
    assert (await store.state(KEY), await store.turns(KEY), await store.stats(KEY)) == before


async def test_a_digest_request_holds_at_most_what_one_compaction_folds(
    make_manager: MakeManager, scripted: Callable[..., ScriptedModel], tok: TokenCounter,
) -> None:
    # No compaction (a window of 100 messages): 30 unfolded turns, a fold bound of ~5.
    per_turn = tok.count(say(29).text) + FOLD_TURN_OVERHEAD
    bound = 5 * per_turn + per_turn // 2
    model = scripted("## Topics\n- message number 29 from Carol")
    mgr = make_manager(model, policy=WindowPolicy(max_messages=100, keep_messages=4,
                                                  max_fold_tokens=bound))
    await record_all(mgr, [say(i) for i in range(30)])
    digest = await mgr.digest(KEY)
    assert digest.fresh and model.purposes == ["digest"]
    request: SummaryRequest = model.requests[-1]
    sent = [t for _, t in request.blocks]
    assert sent == [say(i).text for i in range(25, 30)]  # the newest that fit, in order
    assert sum(tok.count(t) + FOLD_TURN_OVERHEAD for t in sent) <= bound


async def test_digest_of_an_empty_channel_says_so_without_a_model_call(
    make_manager: MakeManager, scripted: Callable[..., ScriptedModel]
) -> None:
    mgr = make_manager(scripted())
    digest = await mgr.digest(KEY)
    assert digest.empty and digest.text == "" and digest.stats.turns == 0


async def test_digest_falls_back_to_the_stored_summary(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    mgr = make_manager(scripted(extractive(tok), "Error: model down"))
    await record_all(mgr, [say(i) for i in range(11)])
    await mgr.wait_idle()
    digest = await mgr.digest(KEY)
    assert not digest.fresh and not digest.empty
    assert digest.text == (await store.state(KEY)).text


# ---------------------------------------------------------------------------- lifecycle


async def test_close_with_a_compaction_in_flight_is_harmless(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    blocked = Block(asyncio.Event(), extractive(tok))
    model = scripted(blocked)
    mgr = make_manager(model)
    await record_all(mgr, [say(i) for i in range(11)])
    await blocked.entered.wait()
    before = await store.state(KEY)
    await mgr.close(grace=0)
    await mgr.close(grace=0)  # twice is fine
    assert model.in_flight == 0 and store.commits == []
    assert await store.state(KEY) == before
    assert len(await store.turns(KEY)) == 11
    assert (await mgr.record(say(11))).created  # recording still works; no compaction starts
    assert not mgr.busy(KEY)

    # a new manager resumes the overflowing channel on start()
    fresh = ExtractiveModel(tok)
    mgr2 = make_manager(fresh)
    await mgr2.start()
    await mgr2.wait_idle()
    assert fresh.calls == 1 and len(await store.pending(KEY)) == 4


async def test_close_lets_a_finishing_compaction_commit(
    make_manager: MakeManager, store: SpyStore, scripted: Callable[..., ScriptedModel],
    tok: TokenCounter,
) -> None:
    blocked = Block(asyncio.Event(), extractive(tok))
    mgr = make_manager(scripted(blocked))
    await record_all(mgr, [say(i) for i in range(11)])
    await blocked.entered.wait()
    asyncio.get_running_loop().call_soon(blocked.release.set)
    await mgr.close(grace=30)
    assert [ok for _, _, ok in store.commits] == [True]


async def test_retention_deletes_only_old_folded_turns(
    make_manager: MakeManager, store: SpyStore, tok: TokenCounter
) -> None:
    now = 10 * 86400.0
    mgr = make_manager(ExtractiveModel(tok), retention_days=2, clock=lambda: now)
    old = [say(i, sent_at=now - 5 * 86400) for i in range(11)]  # 7 get folded, 4 not
    await record_all(mgr, old)
    await mgr.wait_idle()
    recent = [say(i, sent_at=now - 3600) for i in range(11, 22)]  # folded too, but recent
    await asyncio.gather(*(mgr.record(t) for t in recent))  # one batch: 4 + 11, fold 11
    await mgr.wait_idle()
    state = await store.state(KEY)
    assert state.folded_through == 18

    await mgr.start()
    await store.purged.wait()
    remaining = [t.message_id for t in await store.turns(KEY)]
    assert remaining == [f"m{i}" for i in range(11, 22)]  # old folded gone, rest kept
    assert (await store.state(KEY)).text == state.text


# ---------------------------------------------------------------------------- property


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("record"), st.integers(1, 25)),
        st.tuples(st.just("redeliver"), st.integers(0, 10_000)),
        st.tuples(st.just("idle"), st.just(0)),
        st.tuples(st.just("force"), st.just(0)),
    ),
    min_size=1,
    max_size=12,
)
TEXTS = st.sampled_from([
    "hello there", "order ORD-{n} is late", "주문 {n}번 확인 부탁드려요", "see https://x.example/{n}",
    "mail u{n}@example.com", "`code-{n}` broke", "ok", "", "긴 글 " * 80, "🚀 shipped v{n}.0.1",
])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, texts=st.lists(TEXTS, min_size=30, max_size=30),
       max_messages=st.integers(2, 12), keep_ratio=st.floats(0, 0.9),
       summary_tokens=st.sampled_from([60, 200, 600]))
def test_no_turn_is_lost_or_duplicated(
    ops: list[tuple[str, int]], texts: list[str], max_messages: int, keep_ratio: float,
    summary_tokens: int,
) -> None:
    keep = int((max_messages - 1) * keep_ratio)
    asyncio.run(_scenario(ops, texts, WindowPolicy(max_messages, keep), summary_tokens))


@functools.cache
def _tokenizer() -> TokenCounter:
    return TokenCounter("gpt-4o")


async def _scenario(
    ops: list[tuple[str, int]], texts: list[str], policy: WindowPolicy, summary_tokens: int
) -> None:
    tok = _tokenizer()
    model = ExtractiveModel(tok)
    recorded: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "p.db", synchronous="OFF")
        await store.open()
        mgr = MemoryManager(store, Summarizer(model, tok, summary_tokens=summary_tokens), tok,
                            policy, config=MemoryConfig(retry_base=0.001))
        try:
            n = 0
            for op, arg in ops:
                if op == "record":
                    batch = []
                    for _ in range(arg):
                        text = texts[n % len(texts)].format(n=n)
                        batch.append(say(n, text, mid=f"id{n}"))
                        recorded[f"id{n}"] = clean_text(text)
                        n += 1
                    await asyncio.gather(*(mgr.record(t) for t in batch))
                elif op == "redeliver" and recorded:
                    mid = sorted(recorded)[arg % len(recorded)]
                    assert not (await mgr.record(say(0, "changed?", mid=mid))).created
                elif op == "idle":
                    await mgr.wait_idle()
                elif op == "force":
                    await mgr.compact_now(KEY, force=True)
                await _check(store, recorded, model)
            await mgr.wait_idle()
            await _check(store, recorded, model)
            count, tokens = await store.pending_size(KEY)
            assert not policy.should_compact(count, tokens)  # settled under the trigger
        finally:
            await mgr.close(grace=0)
            await store.close()


async def _check(store: SqliteStore, recorded: dict[str, str], model: ExtractiveModel) -> None:
    assert model.max_in_flight <= 1
    # compaction runs in the background: read state and pending in one transaction
    state, pending = await store.snapshot(KEY, limit=10**6, facts_limit=10**6)
    turns = await store.turns(KEY, limit=10**6)
    ids = [t.message_id for t in turns]
    assert len(ids) == len(set(ids)), "duplicated turn"
    assert set(ids) == set(recorded), "lost (or invented) turn"
    assert all(t.text == recorded[t.message_id] for t in turns), "text changed"
    seqs = [t.seq for t in turns]
    assert seqs == sorted(seqs)
    assert pending == [t for t in turns if t.seq > state.folded_through]
    folded = [t for t in turns if t.seq <= state.folded_through]
    if any(t.text.strip() for t in folded):
        assert state.text  # something was said, so the summary says something
    # what was folded is still in memory: every identifier in the summary or the facts
    facts = {f.value for f in state.facts}
    for t in folded:
        for ident in extract_identifiers(t.text):
            assert contains_identifier(state.text, ident) or ident in facts, ident


async def test_a_burst_of_records_is_admitted_a_few_at_a_time(
    store: SpyStore, make_manager: MakeManager, scripted: Callable[..., Any]
) -> None:
    """Backpressure: at most ``max_inflight_records`` records reach the store at once; the
    rest wait parked (and all of them land)."""
    mgr = make_manager(scripted(), max_inflight_records=3)
    inflight = peak = 0
    real_record = store.inner.record

    async def counting_record(turn: NewTurn) -> Any:
        nonlocal inflight, peak
        inflight += 1
        peak = max(peak, inflight)
        try:
            await asyncio.sleep(0.01)  # let the others pile up
            return await real_record(turn)
        finally:
            inflight -= 1

    store.record = counting_record  # type: ignore[method-assign]
    policy_safe = [say(i, key=ChannelKey("d", "g", f"c{i}")) for i in range(20)]
    await asyncio.gather(*(mgr.record(t) for t in policy_safe))
    assert peak == 3
    for t in policy_safe:
        assert len(await store.inner.turns(t.key)) == 1


async def test_a_preempted_summary_is_retried_soon_and_is_not_a_failure(
    make_manager: MakeManager, store: SpyStore,
    scripted: Callable[..., ScriptedModel], tok: TokenCounter,
) -> None:
    """A reply took the endpoint's slot (``Preempted``): compaction tries again after
    ``lease_wait``, without counting a failure or backing off exponentially."""
    from memory.errors import Preempted

    model = scripted(Preempted("a reply needed the slot"), extractive(tok))
    mgr = make_manager(model, retry_base=600.0, lease_wait=0.05)
    await record_all(mgr, [say(i) for i in range(11)])
    await asyncio.wait_for(mgr.wait_idle(), 10)  # a 600 s backoff would not finish
    assert mgr.compaction_failures == 0
    assert (await store.state(KEY)).folded_through == 7
    model.assert_done()


# ---------------------------------------------------------------------------- replies first


async def test_a_background_compaction_waits_for_the_reply_view_in_progress(
    make_manager: MakeManager, store: SpyStore, tok: TokenCounter
) -> None:
    """The message that overflows the window is often the one being answered: its
    compaction reads and builds its request only after that reply's view is composed."""
    mgr = make_manager(ExtractiveModel(tok))
    events: list[str] = []
    gate = asyncio.Event()
    snapshot, state = store.inner.snapshot, store.inner.state

    async def slow_snapshot(*a: Any, **kw: Any) -> Any:
        await gate.wait()
        return await snapshot(*a, **kw)

    async def compaction_reads(*a: Any, **kw: Any) -> Any:
        events.append("compaction reads")
        return await state(*a, **kw)

    store.snapshot = slow_snapshot  # type: ignore[method-assign]
    store.state = compaction_reads  # type: ignore[method-assign]
    await record_all(mgr, [say(i) for i in range(10)])  # at the window, not over it

    async def reply() -> None:
        await mgr.view(KEY, 2000, recall=True)
        events.append("view composed")

    replying = asyncio.create_task(reply())
    await asyncio.sleep(0)  # the view has started
    await mgr.record(say(10))  # over the window: compaction scheduled
    await asyncio.sleep(0.1)
    assert events == []  # it waits for the view
    gate.set()
    await replying
    await mgr.wait_idle()
    assert events[:2] == ["view composed", "compaction reads"]
    assert len(store.commits) == 1


async def test_the_wait_for_views_is_capped() -> None:
    views = Views()
    with views.viewing():  # a view that never ends does not stop compaction
        await asyncio.wait_for(views.finished(cap=0.05), timeout=5)
    assert views.running == 0


# ---------------------------------------------------------------------------- late answers


@pytest.mark.parametrize("recall", [True, False])
async def test_a_view_for_a_folded_turn_ends_with_that_turn(
    make_manager: MakeManager, store: SpyStore, tok: TokenCounter, recall: bool
) -> None:
    """A late answer (after a crash or downtime) is for its message even when compaction
    folded that message into the summary first: the view reads it back and puts it last."""
    mgr = make_manager(ExtractiveModel(tok))
    mention = (await mgr.record(say(0, "@gistbot which port does the staging proxy use?"))).turn
    await record_all(mgr, [say(i) for i in range(1, 31)])
    await mgr.wait_idle()
    assert (await store.state(KEY)).folded_through > mention.seq  # folded meanwhile

    view = await mgr.view(KEY, 2000, through_seq=mention.seq, recall=recall)
    assert view.turns, "the view has no turn to answer"
    assert view.turns[-1].message_id == mention.message_id
    assert view.turns[-1].text == mention.text
    assert all(t.seq < mention.seq for t in view.turns[:-1])
    assert view.tokens <= 2000
