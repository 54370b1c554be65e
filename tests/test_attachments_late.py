"""A file's text belongs to its message whenever it arrives: the real slack-bolt app over
HTTP against the loopback Slack, whose file host holds a download back, and the real
openai SDK against the OpenAI fake.

* Compaction folds a message while its file is still downloading: the text still joins
  that turn (SQLite and PostgreSQL), the turn search and a later reply's recall find it,
  and the next summary is asked about it.
* A question sent right after its file waits for the file (``ATTACHMENT_WAIT_SECONDS``).
* A file host that never answers holds a reply no longer than that: the answer comes, and
  its prompt says the files are still being read.
* A read cut short by shutdown leaves its message whole, with the file named.
* An image the model refused is marked in its turn even when compaction folded it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.attachments.intake import STILL_READING, AttachmentIntake
from bot.attachments.vision import ImagePart
from memory.manager import MemoryManager
from memory.models import NewTurn
from memory.search_text import query_terms
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter
from tests.fakes.models import ScriptedModel
from tests.fakes.openai_server import (
    FakeOpenAI,
    Request,
    content_text,
    default_responder,
    is_summary_request,
)
from tests.harness.postgres import fresh_schema, reachable
from tests.harness.slack import KEY, Harness, mention, open_harness

NOTES = b"handover for the night shift\ndeploy_token: QX-7741-ZB\nrollback window 02:00\n"
TOKEN = "QX-7741-ZB"
EMBEDDER = "embed-test"


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(responder=default_responder) as fake:
        yield fake


@contextlib.asynccontextmanager
async def database(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    """A ``DATABASE_URL`` of a fresh database of ``backend``."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'gistbot.db'}"
        return
    if not reachable():
        pytest.skip("no PostgreSQL listening")
    async with fresh_schema("gistbot_late") as url:
        yield url


def replies(fake: FakeOpenAI) -> list[Request]:
    """The reply requests, not summaries."""
    return [r for r in fake.chat_requests if not is_summary_request(r.json or {})]


def prompt_of(request: Request) -> str:
    return "\n".join(content_text(m["content"]) for m in (request.json or {})["messages"])


def shown(h: Harness) -> list[str]:
    """What the channel shows of the bot: posted and edited texts, in order."""
    return [c.params.get("text", "") for c in h.fake.calls
            if c.method in ("chat.postMessage", "chat.update")]


def shared(text: str, ts: str, *files: dict[str, Any]) -> dict[str, Any]:
    """A ``file_share`` message event in C1."""
    return mention(text, ts=ts, kind="message", subtype="file_share", files=list(files))


async def until(check: Callable[[], object], what: str, within: float = 30.0) -> None:
    """Poll ``check`` (its result awaited if it is a coroutine) until it is true; fail
    after ``within`` seconds (a deadline, not a timing: the condition is what the test
    waits for)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while not (await got if inspect.isawaitable(got := check()) else got):
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def chatter(h: Harness, first: int, n: int) -> None:
    """``n`` messages from Bob that nobody answers."""
    for i in range(first, first + n):
        event = mention(f"chatter {i} about the lunch order", ts=f"1700000100.{i:06d}",
                        user="U2", kind="message")
        assert await h.event(event, event_id=f"EvC{i}") == 200


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_file_read_after_compaction_folded_its_message_joins_its_turn(
    backend: str, tmp_path: Path, model: FakeOpenAI
) -> None:
    async with database(backend, tmp_path) as url:
        env = {"DATABASE_URL": url, "OPENAI_BASE_URL": model.base_url,
               "MODEL_NAME": "gpt-test", "LLM_MAX_RETRIES": "0", "MAX_HISTORY_MESSAGES": "10",
               "KEEP_RECENT_MESSAGES": "4", "ATTACHMENT_TIMEOUT": "300",
               "EMBEDDING_MODEL": EMBEDDER}
        async with open_harness(tmp_path, None, env) as h:
            held = asyncio.Event()
            try:
                f = h.fake.file("handover.txt", NOTES, "text/plain", release=held)
                assert await h.event(shared("the handover notes", "1700000001.000100", f)) == 200
                await chatter(h, 0, 60)
                await h.settle()
                await h.rt.memory.wait_idle()
                (first,) = [t for t in await h.turns() if t.message_id == "1700000001.000100"]
                assert (await h.rt.store.state(KEY)).folded_through >= first.seq  # folded first
            finally:
                held.set()  # the download finishes only now
            await asyncio.wait_for(h.rt.features.attachments.idle(), 60)

            # stored with its turn, and the turn search finds it
            (turn,) = await h.rt.store.turns_at(KEY, [first.seq])
            assert TOKEN in turn.text and turn.text.startswith("the handover notes")
            found = await h.rt.store.search_turns(KEY, query_terms("deploy_token handover"),
                                                  before_seq=10_000)
            assert first.seq in [t.seq for t in found]
            assert [t.seq for t in await h.rt.store.amended(KEY)] == [first.seq]

            # and the embedding index gets the new text (the old vector went with it)
            async def embedded() -> bool:
                missing, _ = await h.rt.store.unembedded_turns(
                    KEY, EMBEDDER, below=None, span=10_000, limit=1_000)
                return first.seq not in [t.seq for t in missing]

            await until(embedded, "the late text to be embedded")
            assert any(TOKEN in t for t in model.embedded_texts())

            # /summary is told it too (it stores nothing, so the turn stays queued)
            asked = len(model.chat_requests)
            status, _ = await h.command("/summary", user="U2")
            assert status == 200
            await h.settle()
            digests = [r for r in model.chat_requests[asked:] if is_summary_request(r.json or {})]
            assert digests and all(TOKEN in prompt_of(r) for r in digests)
            assert [t.seq for t in await h.rt.store.amended(KEY)] == [first.seq]
            after_digest = len(model.chat_requests)

            # a later question recalls it into the reply's prompt
            ask = mention("<@UBOT> what was the deploy_token in the handover notes?",
                          ts="1700000300.000100", user="U2")
            assert await h.event(ask, event_id="EvAsk") == 200
            await h.settle()
            assert TOKEN in prompt_of(replies(model)[-1])

            # the next summary round (this question's turns may start it) is told the late
            # text, and takes it off the queue
            await chatter(h, 100, 12)
            await h.settle()
            await h.rt.memory.wait_idle()
            later = [r for r in model.chat_requests[after_digest:]
                     if is_summary_request(r.json or {})]
            assert any(TOKEN in prompt_of(r) for r in later)
            assert await h.rt.store.amended(KEY) == []
            (turn,) = await h.rt.store.turns_at(KEY, [first.seq])
            assert TOKEN in turn.text


async def test_a_question_sent_right_after_its_file_waits_for_the_file(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-test",
           "LLM_MAX_RETRIES": "0", "ATTACHMENT_TIMEOUT": "300",
           "ATTACHMENT_WAIT_SECONDS": "300"}
    async with open_harness(tmp_path, None, env) as h:
        held = asyncio.Event()
        try:
            f = h.fake.file("handover.txt", NOTES, "text/plain", release=held)
            assert await h.event(shared("the handover notes", "1700000001.000100", f)) == 200
            ask = mention("<@UBOT> what is the deploy_token in those notes?",
                          ts="1700000001.000200")
            assert await h.event(ask, event_id="Ev2") == 200
            # the reply either went out without the file, or it is waiting for it
            await until(lambda: replies(model) or h.rt.features.attachments.waiting,
                        "the reply to be made or to wait")
        finally:
            held.set()
        await h.settle()
        (reply,) = replies(model)
        prompt = prompt_of(reply)
        assert TOKEN in prompt and STILL_READING not in prompt
        assert shown(h)[-1].startswith("You said:")


async def test_a_file_host_that_never_answers_holds_a_reply_only_as_long_as_the_setting(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-test",
           "LLM_MAX_RETRIES": "0", "ATTACHMENT_TIMEOUT": "300",
           "ATTACHMENT_WAIT_SECONDS": "0.5"}
    async with open_harness(tmp_path, None, env) as h:
        never = asyncio.Event()
        try:
            earlier = h.fake.file("handover.txt", NOTES, "text/plain", release=never)
            own = h.fake.file("config.yaml", b"region: eu-west-3\n", "text/plain",
                              release=never)
            assert await h.event(shared("the handover notes", "1700000001.000100",
                                        earlier)) == 200
            ask = shared("<@UBOT> do these match the notes?", "1700000001.000200", own)
            assert await h.event(ask, event_id="Ev2") == 200
            await h.settle()  # the reply was delivered while both downloads hang
            (reply,) = replies(model)
            last = content_text((reply.json or {})["messages"][-1]["content"])
            assert f"[attachment: config.yaml, {STILL_READING}]" in last
            assert f"[attachment: handover.txt, {STILL_READING}]" in prompt_of(reply)
            assert TOKEN not in prompt_of(reply)
            assert shown(h)[-1].startswith("You said:")
            assert h.rt.features.attachments.reading == 2
        finally:
            never.set()
        # the files still join their messages once they arrive
        await asyncio.wait_for(h.rt.features.attachments.idle(), 60)
        assert any(TOKEN in t.text for t in await h.turns())


async def test_a_read_cut_short_by_shutdown_leaves_its_message_with_the_file_named(
    tmp_path: Path, model: FakeOpenAI
) -> None:
    env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-test",
           "LLM_MAX_RETRIES": "0", "ATTACHMENT_TIMEOUT": "300"}
    async with open_harness(tmp_path, None, env) as h:
        held = asyncio.Event()
        try:
            f = h.fake.file("handover.txt", NOTES, "text/plain", release=held)
            assert await h.event(shared("the handover notes", "1700000001.000100", f)) == 200
            await until(lambda: h.fake.files.fetched, "the download to start")
            await h.rt.features.attachments.close()  # what shutdown does with reads in flight
        finally:
            held.set()
        (turn,) = await h.turns()
        assert turn.text == "the handover notes [file: handover.txt]"  # whole, file named
        assert await h.rt.store.amended(KEY) == []


async def test_a_refused_image_is_marked_in_its_turn_even_after_compaction_folded_it(
    tmp_path: Path, tok: TokenCounter
) -> None:
    store = SqliteStore(tmp_path / "memory.db")
    await store.open()
    memory = MemoryManager(store, Summarizer(ScriptedModel(), tok), tok)  # never summarizes
    try:
        shot = "look [image: screen.png, 300×200: a terminal]"
        for i, text in enumerate([shot, "one", "two"]):
            await memory.record(NewTurn(KEY, f"m{i}", "user", "U1", "Alice", text, 0, 1.0 + i))
        state = await store.state(KEY)
        assert await store.commit_summary(KEY, expected_version=state.version, text="S",
                                          folded_through=2, facts=(), now=1.0)
        intake = AttachmentIntake(memory)
        part = ImagePart("image/png", b"", "low", 85, line="[image: screen.png, 300×200")
        marked = await intake.refused(KEY, "m0", shot, [part])
        (turn,) = await store.turns_at(KEY, [1])
        assert turn.text == marked == "look [image: screen.png, 300×200, could not be read]"
    finally:
        await memory.close(grace=0)
        await store.close()
