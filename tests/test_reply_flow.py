"""The one reply flow (``bot.conversation.reply_flow``): placeholder, streaming, chunking, delivery,
apology and settling through a recording outlet; and the path of one Slack event, from
the adapter to the posted reply, through the real Slack adapter and service.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dataclasses
import inspect
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.conversation.outbox import Outbox, Post, reply_id
from bot.conversation.reply_flow import ReplyFlow
from bot.messages import DeltaSink, IncomingMessage, Outcome, PendingReply, Reply
from bot.ops.shutdown import SHUTDOWN_APOLOGY
from bot.stores import Storage
from memory.errors import StoreError
from memory.models import ChannelKey
from memory.stores.sqlite.store import SqliteStore
from tests.harness.slack import Harness, mention

KEY = ChannelKey("test", "w", "c")
ROOT = Path(__file__).resolve().parent.parent


class Outlet:
    """A ``ReplyOutlet`` that records what it is asked to do; ids are "1", "2", …"""

    def __init__(self, placeholder: str = "thinking…", stream_interval: float | None = None,
                 limit: int = 1000) -> None:
        self.placeholder, self.stream_interval, self.limit = placeholder, stream_interval, limit
        self.log: list[tuple[str, ...]] = []
        self.refuse_posts = False

    async def post(self, post: Post) -> str | None:
        if self.refuse_posts:
            return None
        self.log.append(("post", post.text))
        return str(sum(1 for entry in self.log if entry[0] == "post"))

    async def edit(self, post: Post, message_id: str) -> bool:
        self.log.append(("edit", message_id, post.text))
        return True

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        self.log.append(("delete", message_id))
        return True

    async def find(self, post: Post) -> str | None:
        self.log.append(("find", post.outbox_id))
        return "77"

    def split(self, text: str) -> tuple[list[str], str]:
        return [text[i:i + self.limit] for i in range(0, len(text), self.limit)], ""

    def preview(self, text: str) -> str:
        return f"{text} …"

    async def whisper(self, msg: IncomingMessage, text: str) -> None:
        self.log.append(("whisper", msg.author_id, text))

    @contextlib.asynccontextmanager
    async def working(self, key: ChannelKey) -> AsyncIterator[None]:
        self.log.append(("working",))
        yield


class Debt:
    """What the flow reports back: shown placeholders and settlements."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.settled: list[bool] = []
        self.recorded: list[bool] = []  # settled already with the last post's record


class Job:
    """A scripted reply job: ``compose`` makes the reply; what the flow reports goes to
    ``debt``."""

    def __init__(self, compose: Callable[[DeltaSink | None], Awaitable[Reply | None]],
                 debt: Debt) -> None:
        self.compose, self.debt = compose, debt

    async def placed(self, shown: str) -> None:
        self.debt.shown.append(shown)

    async def make(self, sink: DeltaSink | None) -> Reply | None:
        return await self.compose(sink)

    async def settled(self, delivered: bool, *, recorded: bool = False) -> None:
        self.debt.settled.append(delivered)
        self.debt.recorded.append(recorded)


def pending(compose: Callable[[DeltaSink | None], Awaitable[Reply | None]], debt: Debt, *,
            outcome: Outcome = Outcome.RECORDED, message_id: str = "m1", **kw: Any
            ) -> PendingReply:
    msg = IncomingMessage(KEY, message_id, "alice", "Alice", "hi?", 0.0, mentions_bot=True)
    return PendingReply(msg, outcome, Job(compose, debt), owed=True, **kw)


def answer(text: str, *, private: bool = False) -> Callable[[DeltaSink | None],
                                                            Awaitable[Reply]]:
    async def compose(sink: DeltaSink | None) -> Reply:
        if sink is not None:
            for i in range(1, len(text) + 1):
                await sink(text[:i])
        return Reply(text, private=private)

    return compose


async def test_placeholder_then_the_answer_in_it_then_settled() -> None:
    outlet, debt = Outlet(limit=5), Debt()
    assert await ReplyFlow(outlet).deliver(pending(answer("hello world"), debt))
    assert outlet.log == [("post", "thinking…"), ("working",), ("edit", "1", "hello"),
                          ("post", " worl"), ("post", "d")]  # chunks after the first follow
    assert debt.shown == ["1"] and debt.settled == [True]


async def test_streamed_into_the_placeholder_or_posted_at_the_first_delta() -> None:
    outlet, debt = Outlet(stream_interval=0.0), Debt()
    await ReplyFlow(outlet).deliver(pending(answer("abc"), debt))
    assert [e for e in outlet.log if e[0] == "edit"] == [
        ("edit", "1", "a …"), ("edit", "1", "ab …"), ("edit", "1", "abc …"), ("edit", "1", "abc")]
    bare, debt = Outlet(placeholder="", stream_interval=0.0), Debt()
    await ReplyFlow(bare).deliver(pending(answer("abc"), debt))
    assert bare.log[:3] == [("working",), ("post", "a …"), ("edit", "1", "ab …")]
    assert debt.shown == ["1"]  # the streamed start stands in for a placeholder


async def test_the_first_intent_is_recorded_while_the_answer_is_made_and_settles_once(
    tmp_path: Path,
) -> None:
    """Off the reply's path: the first message's intent is written while the model answers;
    the debt is settled in the last post's record, and the job is told so (no second
    write)."""
    async with Storage.on(SqliteStore(tmp_path / "bot.db")) as storage:
        first = reply_id(KEY, "m1", 0)

        def row(conn: sqlite3.Connection) -> Any:
            return conn.execute("SELECT message_id FROM outbox WHERE id = ?", (first,)).fetchone()

        async def compose(sink: DeltaSink | None) -> Reply:
            for _ in range(50):  # the intent's write lands while the answer is made
                if await storage.memory.read(row) is not None:
                    break
                await asyncio.sleep(0.01)
            seen.append(await storage.memory.read(row))
            return Reply("hello world")

        seen: list[Any] = []
        outlet, debt = Outlet(limit=5), Debt()
        assert await ReplyFlow(outlet, Outbox(storage.outbox)).deliver(pending(compose, debt))
        assert seen == [("",)]  # recorded before the post: a retry would look first
        assert [e[0] for e in outlet.log].count("find") == 0  # this attempt did not look
        assert debt.settled == [True] and debt.recorded == [True]
        assert await storage.memory.read(row) == ("1",)  # into the placeholder, recorded


async def test_a_private_answer_removes_the_placeholder_and_is_whispered() -> None:
    outlet, debt = Outlet(), Debt()
    await ReplyFlow(outlet).deliver(pending(answer("over quota", private=True), debt))
    assert outlet.log == [("post", "thinking…"), ("working",), ("delete", "1"),
                          ("whisper", "alice", "over quota")]
    assert debt.settled == [True]


async def test_nothing_to_send_removes_the_placeholder() -> None:
    async def nothing(sink: DeltaSink | None) -> None:
        return None

    outlet, debt = Outlet(), Debt()
    assert await ReplyFlow(outlet).deliver(pending(nothing, debt))
    assert outlet.log[-1] == ("delete", "1") and debt.settled == [True]


async def test_a_failing_model_call_is_answered_with_a_sentence() -> None:
    async def broken(sink: DeltaSink | None) -> Reply:
        raise RuntimeError("secret detail")

    outlet, debt = Outlet(), Debt()
    await ReplyFlow(outlet).deliver(pending(broken, debt))
    (text,) = [e[2] for e in outlet.log if e[0] == "edit"]
    assert "secret" not in text and text.startswith("Sorry")


async def test_a_store_failure_is_told_once_per_message_and_without_a_placeholder() -> None:
    outlet, flow = Outlet(), ReplyFlow(Outlet())
    flow.outlet = outlet
    for _ in range(2):  # the platform delivers the unstored message again
        await flow.deliver(pending(answer("couldn't save"), Debt(), outcome=Outcome.STORE_FAILED))
    assert outlet.log == [("working",), ("post", "couldn't save"), ("working",)]


async def test_cut_short_by_shutdown_leaves_an_apology_and_releases_the_debt() -> None:
    started = asyncio.Event()

    async def slow(sink: DeltaSink | None) -> Reply:
        started.set()
        await asyncio.sleep(60)
        return Reply("never")

    outlet, debt = Outlet(), Debt()
    task = asyncio.create_task(ReplyFlow(outlet).deliver(pending(slow, debt)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert outlet.log[-1] == ("edit", "1", SHUTDOWN_APOLOGY)
    assert debt.shown == ["1", ""] and debt.settled == [False]  # answered after the restart

    bare, debt = Outlet(placeholder=""), Debt()
    bare.find = lambda post: asyncio.sleep(0, None)  # type: ignore[method-assign]  # none
    started.clear()
    task = asyncio.create_task(ReplyFlow(bare).deliver(pending(slow, debt, late=True)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bare.log == [] and debt.settled == [False]  # told sorry the first time already


async def test_a_late_answer_goes_into_the_placeholder_found_by_its_outbox_id() -> None:
    outlet, debt = Outlet(stream_interval=0.0), Debt()
    await ReplyFlow(outlet).deliver(pending(answer("late"), debt, late=True))
    assert outlet.log[0][0] == "find" and outlet.log[-1] == ("edit", "77", "late")
    assert ("post", "thinking…") not in outlet.log and debt.settled == [True]
    assert ("working",) not in outlet.log  # made in the background: nobody watches it typed


async def test_with_no_placeholder_posted_the_answer_is_posted() -> None:
    outlet, debt = Outlet(), Debt()
    outlet.refuse_posts = True  # the placeholder is refused, then Slack recovers
    flow = ReplyFlow(outlet)

    async def recovering(sink: DeltaSink | None) -> Reply:
        outlet.refuse_posts = False
        return Reply("answer")

    await flow.deliver(pending(recovering, debt))
    assert outlet.log == [("working",), ("post", "answer")] and debt.shown == []


# ---------------------------------------------------------------- one Slack event's path


def named(module: Path) -> set[str]:
    """The functions of ``module`` a reader finds by name: its own and its classes' (not
    those defined inside another function)."""
    bodies = [ast.parse(module.read_text(encoding="utf-8")).body]
    bodies += [node.body for node in bodies[0] if isinstance(node, ast.ClassDef)]
    return {node.name for body in bodies for node in body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def on_path(frames: list[inspect.FrameInfo]) -> list[str]:
    """The gistbot functions (adapters/, bot/) on a stack, outermost first."""
    names = []
    for f in reversed(frames):
        path = Path(f.filename).resolve()
        if path.is_relative_to(ROOT / "adapters") or path.is_relative_to(ROOT / "bot"):
            names.append(f"{path.relative_to(ROOT).with_suffix('')}:{f.function}")
    return names


async def test_one_slack_event_reaches_its_reply_through_few_functions(h: Harness) -> None:
    """From the HTTP listener to the answer posted into its placeholder: the functions
    passed (the stacks where the message is received, the answer is made and it is
    posted) and the calls from the adapter into the service layer."""
    stacks: list[list[str]] = []

    def spy(target: Any, name: str) -> None:
        real = getattr(target, name)

        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            stacks.append(on_path(inspect.stack()[1:]))
            return await real(*args, **kwargs)

        setattr(target, name, wrapper)

    spy(h.rt.service, "receive")
    spy(h.rt.llm, "complete")
    spy(h.rt.llm, "stream")
    spy(h.adapter.events.flow.outlet, "edit")
    assert await h.event(mention()) == 200
    await h.settle()
    received, composed, posted = stacks
    received.append("bot/conversation/service:receive")  # the spied functions themselves
    posted.append("adapters/slack/outlet:edit")
    path = dict.fromkeys(received + composed + posted)
    assert len(path) <= 13, "\n".join(path)  # the post's last hop: the outbox's lookup rule
    crossings = [b for stack in (received, composed, posted) for a, b in zip(
        ["(spawned)", *stack], stack, strict=False) if b.startswith("bot/")
        and not a.startswith("bot/")]
    assert sorted(set(crossings)) == [
        "bot/conversation/reply_flow:deliver", "bot/conversation/service:receive"]
    unnamed = [step for step in path if step.startswith("bot/") and step.partition(":")[2]
               not in named(ROOT / f"{step.partition(':')[0]}.py")]
    assert not unnamed, unnamed  # past the adapter, each step is found by its name


def test_a_pending_reply_carries_data_and_its_job_not_closures() -> None:
    """What the service hands the flow is read by name: no field of ``PendingReply`` is a
    function the flow calls (the job's steps are methods, ``bot.messages.ReplySteps``)."""
    fields = {f.name: str(f.type) for f in dataclasses.fields(PendingReply)}
    assert fields["job"] == "ReplySteps"
    assert not [name for name, kind in fields.items() if "Callable" in kind], fields


class SlowIntents:
    """An ``OutboxStore`` whose intent writes wait (a busy writer): slower than the model."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.posted: list[str] = []

    async def outbox_intent(self, key: ChannelKey, outbox_id: str) -> str | None:
        self.waiting.set()
        await asyncio.Event().wait()  # never lands before shutdown's grace runs out
        return None

    async def outbox_posted(self, key: ChannelKey, outbox_id: str, message_id: str, *,
                            settle: str = "") -> None:
        self.posted.append(outbox_id)


async def test_cut_short_while_the_intent_is_still_written_apologizes_and_releases() -> None:
    """The answer is made, but its first intent's write has not landed when shutdown cuts
    the reply short: nothing was posted, so the placeholder becomes the apology and the
    debt is released (answered after the restart), not settled with nothing shown."""
    answered = asyncio.Event()

    async def compose(sink: DeltaSink | None) -> Reply:
        answered.set()
        return Reply("the answer")

    store, outlet, debt = SlowIntents(), Outlet(), Debt()
    flow = ReplyFlow(outlet, Outbox(store))
    task = asyncio.create_task(flow.deliver(pending(compose, debt)))
    await store.waiting.wait()
    await answered.wait()
    for _ in range(5):  # the flow goes on to wait on the intent's write
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ("post", "the answer") not in outlet.log and not store.posted
    assert outlet.log[-1] == ("edit", "1", SHUTDOWN_APOLOGY)  # not "thinking…" for ever
    assert debt.settled == [False]  # owed still: answered after the restart


class Channel(Outlet):
    """One channel two replicas post into, with no placeholder (refused, or none): a post
    is found by its outbox id once it stands."""

    def __init__(self) -> None:
        super().__init__(placeholder="")
        self.by_outbox: dict[str, str] = {}

    async def post(self, post: Post) -> str | None:
        posted = await super().post(post)
        if posted is not None:
            self.by_outbox[post.outbox_id] = posted
        return posted

    async def find(self, post: Post) -> str | None:
        self.log.append(("find", post.outbox_id))
        return self.by_outbox.get(post.outbox_id)


async def test_an_answer_posted_by_another_replica_while_this_one_answered_is_not_posted_twice(
    tmp_path: Path,
) -> None:
    """This replica recorded the first intent and its model is slow; its claim runs out and
    another replica (the same database) answers the message. When the slow answer is done,
    the post the other one recorded meanwhile stands: nothing is posted beside it."""
    async with Storage.on(SqliteStore(tmp_path / "bot.db")) as storage:
        first = reply_id(KEY, "m1", 0)
        channel, go, intended = Channel(), asyncio.Event(), asyncio.Event()

        def row(conn: sqlite3.Connection) -> Any:
            return conn.execute("SELECT message_id FROM outbox WHERE id = ?", (first,)).fetchone()

        async def slow(sink: DeltaSink | None) -> Reply:
            for _ in range(500):  # the intent lands meanwhile
                if await storage.memory.read(row) is not None:
                    break
                await asyncio.sleep(0.01)
            intended.set()
            await go.wait()
            return Reply("slow answer")

        mine = asyncio.create_task(
            ReplyFlow(channel, Outbox(storage.outbox)).deliver(pending(slow, Debt())))
        await intended.wait()
        other = ReplyFlow(channel, Outbox(storage.outbox))
        assert await other.deliver(pending(answer("other answer"), Debt(), late=True))
        go.set()
        assert await mine
        posts = [e for e in channel.log if e[0] == "post"]
        assert posts == [("post", "other answer")]  # one answer shows, not two


class FailingIntents(SlowIntents):
    """An ``OutboxStore`` whose intent writes fail (a store error) and whose records land."""

    async def outbox_intent(self, key: ChannelKey, outbox_id: str) -> str | None:
        self.waiting.set()
        raise StoreError("disk I/O error")


async def test_a_failed_first_intent_still_sends_the_answer_once_and_not_as_an_error() -> None:
    """The intent written while the model answers fails: the answer goes out anyway, once,
    into its placeholder (without the outbox's guarantee, logged), and the debt is settled
    with its record, not turned into an error notice."""
    store, outlet, debt = FailingIntents(), Outlet(), Debt()
    assert await ReplyFlow(outlet, Outbox(store)).deliver(pending(answer("the answer"), debt))
    assert outlet.log == [("post", "thinking…"), ("working",), ("edit", "1", "the answer")]
    assert store.posted == [reply_id(KEY, "m1", 0)]
    assert debt.settled == [True] and debt.recorded == [True]
    bare, debt = Outlet(placeholder=""), Debt()  # posted blind: the intent is read again
    assert await ReplyFlow(bare, Outbox(store)).deliver(pending(answer("again"), debt))
    assert bare.log == [("working",), ("post", "again")] and debt.settled == [True]


class LateIntents(SlowIntents):
    """An ``OutboxStore`` whose intent write lands only when ``land`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.land = asyncio.Event()

    async def outbox_intent(self, key: ChannelKey, outbox_id: str) -> str | None:
        self.waiting.set()
        await self.land.wait()
        return None


async def test_an_intent_slower_than_the_model_delays_the_answer_which_goes_out_once() -> None:
    """The intent's write takes longer than the model: the answer waits for it (the intent
    is durable before the post) and then goes out once, into its placeholder."""
    store, outlet, debt = LateIntents(), Outlet(), Debt()
    answered = asyncio.Event()

    async def compose(sink: DeltaSink | None) -> Reply:
        answered.set()
        return Reply("the answer")

    task = asyncio.create_task(ReplyFlow(outlet, Outbox(store)).deliver(pending(compose, debt)))
    await answered.wait()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not any(e[0] == "edit" for e in outlet.log)  # nothing sent before the intent
    store.land.set()
    assert await task
    assert outlet.log == [("post", "thinking…"), ("working",), ("edit", "1", "the answer")]
    assert store.posted == [reply_id(KEY, "m1", 0)] and debt.settled == [True]


class RereadHangs(SlowIntents):
    """An ``OutboxStore`` whose first intent write lands at once and whose second read of
    it (before a blind post) waits past shutdown's grace."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def outbox_intent(self, key: ChannelKey, outbox_id: str) -> str | None:
        self.calls += 1
        if self.calls == 1:
            return None
        return await super().outbox_intent(key, outbox_id)


async def test_cut_short_while_the_intent_is_read_again_apologizes_and_releases() -> None:
    """No placeholder, so the first intent is read again before the answer is posted blind;
    shutdown cuts the reply short during that read: nothing was posted, so an apology is,
    and the debt is released rather than settled unanswered."""
    store, outlet, debt = RereadHangs(), Outlet(placeholder=""), Debt()
    task = asyncio.create_task(
        ReplyFlow(outlet, Outbox(store)).deliver(pending(answer("the answer"), debt)))
    waiting = asyncio.create_task(store.waiting.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    assert not task.done(), outlet.log  # it did read again before posting blind
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ("post", "the answer") not in outlet.log
    assert outlet.log[-1] == ("post", SHUTDOWN_APOLOGY) and debt.settled == [False]
