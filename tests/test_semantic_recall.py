"""Semantic recall (``EMBEDDING_MODEL``) end to end: the real ``openai`` SDK against the
loopback fake, whose embeddings are hashed bags of words with controllable concepts
("rio" and "janeiro" mean "brazil"), so a paraphrase is found only by meaning."""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from bot.admin.server import AdminServer
from bot.app import Runtime
from bot.messages import IncomingMessage
from bot.settings import load_settings
from memory.models import ChannelKey, NewTurn, Turn
from memory.ranking import Ranked, Weights, rank
from memory.semantic import WEIGHT as SEMANTIC_WEIGHT
from tests.fakes.openai_server import Error, FakeOpenAI, Hang, content_text
from tests.harness.chat import ask as deliver

KEY = ChannelKey("test", "w1", "c1")
MODEL = "embed-test"
CONCEPTS = {"rio": "brazil", "janeiro": "brazil"}
RIO = "Melanie flew down to Rio de Janeiro for the carnival"
QUESTION = "has anyone here been to Brazil?"
TOPICS = ["garden", "invoice", "printer", "roadmap", "kitchen", "parking", "backup", "badge"]
_ids = itertools.count()


def _turn(seq: int, text: str = "we talked about the weather again today") -> Turn:
    return Turn(KEY, seq, f"m{seq}", "user", "a", "A", text, 1, 1.0)


ONLY_LEXICAL = Weights(speaker=0, author=0, window=0, specific=0, recency=0)


def test_the_nearest_turns_are_one_more_list_of_the_fusion() -> None:
    a, b, c, d = (_turn(i) for i in range(1, 5))
    asking = [_turn(99, QUESTION)]
    assert rank([a, b, c], asking, weights=ONLY_LEXICAL) == [a, b, c]
    # d is only the semantic list's best: it ties with the lexical best (ties: newer first)
    assert rank([a, b, c], asking, weights=ONLY_LEXICAL, extra=[Ranked([d], 1.0)]) == [d, a, b, c]
    # c is in both lists: agreement lifts it over each list's best
    assert rank([a, b, c], asking, weights=ONLY_LEXICAL,
                extra=[Ranked([d, c], 1.0)]) == [c, d, a, b]


def test_a_paraphrase_no_word_search_finds_makes_the_cut_only_with_the_semantic_list() -> None:
    """Two hundred lexical hits, all older chatter; the answer shares no word with the
    question. With every list at its weight, the semantic list alone brings it within the
    few turns a small recall room shows."""
    hits = [_turn(s, f"the {TOPICS[s % len(TOPICS)]} item went to review")
            for s in range(10, 210)]
    answer = _turn(3, RIO)
    asking = [_turn(999, QUESTION)]
    assert answer not in rank(hits, asking)
    ranked = rank(hits, asking, extra=[Ranked([answer, *hits[-59:]], SEMANTIC_WEIGHT)])
    assert answer in ranked[:20]
    assert answer not in rank(hits, asking, extra=[Ranked([answer], 0.0)])


@contextlib.asynccontextmanager
async def runtime(tmp_path: Path, fake: FakeOpenAI, **env: str) -> AsyncIterator[Runtime]:
    settings = load_settings({
        "DATABASE_URL": f"sqlite:///{tmp_path}/semantic.db", "OPENAI_BASE_URL": fake.base_url,
        "MODEL_NAME": "gpt-test", "CONTEXT_TOKENS": "2000", "REPLY_TOKENS": "200",
        "WINDOW_TOKENS": "1000000", "KEEP_TOKENS": "1000", "LLM_MAX_RETRIES": "0",
        "STREAM_REPLIES": "false", **env,
    }, env_file=None)
    async with Runtime.open(settings) as rt:
        yield rt


def msg(text: str, *, who: str = "Alice", ask: bool = False, at: float = 1e9) -> IncomingMessage:
    return IncomingMessage(KEY, f"m{next(_ids)}", who.lower(), who, text, at, mentions_bot=ask)


async def converse(rt: Runtime, n: int = 160, start: int = 0) -> None:
    """A channel where RIO is old, and every other message also says "to"."""
    for i in range(start, start + n):
        text = RIO if i == 3 else f"note {i}: the {TOPICS[i % len(TOPICS)]} item went to review"
        await rt.memory.record(rt.memory.prepare(NewTurn(
            KEY, f"c{i}", "user", "alice", "Alice", text, 0, 1e9 + i * 60)))


async def ask(rt: Runtime, fake: FakeOpenAI, text: str) -> str:
    """The prompt the reply to ``text`` was written from."""
    before = len(fake.chat_requests)
    reply = await deliver(rt, msg(text, who="Bob", ask=True, at=2e9))
    assert reply is not None and reply.text == "ok"
    [request] = fake.chat_requests[before:]
    return "\n".join(content_text(m["content"]) for m in (request.json or {})["messages"])


async def wait_embedded(rt: Runtime) -> None:
    assert rt.memory.indexer is not None
    await rt.memory.indexer.wait_idle()


async def test_a_paraphrase_is_recalled_by_meaning_where_word_search_misses_it(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(responder=lambda body: "ok", concepts=CONCEPTS) as fake:
        async with runtime(tmp_path / "words", fake) as rt:
            await converse(rt)
            words_only = await ask(rt, fake, QUESTION)
        assert fake.embedding_requests == []  # off by default: no embedding call at all
        async with runtime(tmp_path / "meaning", fake, EMBEDDING_MODEL=MODEL) as rt:
            await converse(rt)
            await wait_embedded(rt)
            meaning = await ask(rt, fake, QUESTION)
    assert "note 150" in words_only and "note 150" in meaning  # both prompts are full
    assert RIO not in words_only
    assert RIO in meaning
    # the reply path embedded the question only, with the bot's mention removed
    assert fake.embedded_texts()[-1] == QUESTION
    assert {r.json["model"] for r in fake.embedding_requests if r.json} == {MODEL}


@pytest.mark.parametrize("trouble", [Hang(30.0), Error(500, {"error": {"message": "down"}})],
                         ids=["slow", "failing"])
async def test_a_slow_or_failing_embedding_endpoint_leaves_word_recall(
    tmp_path: Path, trouble: Hang | Error, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeOpenAI(responder=lambda body: "ok", concepts=CONCEPTS, strict=False) as fake:
        async with runtime(tmp_path, fake, EMBEDDING_MODEL=MODEL,
                           EMBEDDING_TIMEOUT="0.3") as rt:
            server = AdminServer(rt, host="127.0.0.1", port=0, inspector=False, token=None)
            server.attach()
            await converse(rt, 40)
            await wait_embedded(rt)
            fake.embedding_error = trouble
            caplog.set_level(logging.WARNING, logger="memory.semantic")
            first = await ask(rt, fake, "which item went to the printer review?")
            second = await ask(rt, fake, "and the roadmap one?")
            semantic = rt.memory.semantic
            assert semantic is not None and semantic.fallbacks == 2
            metrics = generate_latest(server.metrics.registry).decode()
    assert "gistbot_semantic_recall_fallbacks_total 2.0" in metrics
    assert 'gistbot_model_calls_total{kind="embedding",model="embed-test",outcome="ok"}' in metrics
    assert "note 2: the printer item went to review" in first
    assert "roadmap item" in second
    assert caplog.text.count("could not embed a message") == 1  # logged once


async def test_background_batches_are_metered_as_embeddings_of_the_server(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(responder=lambda body: "ok", concepts=CONCEPTS) as fake:
        async with runtime(tmp_path, fake, EMBEDDING_MODEL=MODEL) as rt:
            await converse(rt, 70)
            await wait_embedded(rt)
            await deliver(rt, msg("a reply turn is not embedded", ask=True))
            await wait_embedded(rt)
            usage = await rt.features.quota.usage(KEY, "alice")
            totals = rt.meter.totals()
            assert await rt.store.embedding_count(KEY, MODEL) == 71
    server = next(counts for account, counts in usage.items() if account.user == "")
    person = next(counts for account, counts in usage.items() if account.user == "alice")
    assert server["embedding"] > 0 and "embedding" not in person
    assert totals["embedding"].calls >= 3 and totals["embedding"].prompt_tokens > 0
    # batches, never one request per turn; the bot's reply was not embedded
    assert len(fake.embedding_requests) < 71
    assert max(len((r.json or {})["input"]) for r in fake.embedding_requests) > 1
    assert "ok" not in fake.embedded_texts()


async def test_over_its_daily_limit_the_server_stops_embedding(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=lambda body: "ok", concepts=CONCEPTS) as fake:
        async with runtime(tmp_path, fake, EMBEDDING_MODEL=MODEL,
                           DAILY_TOKENS_PER_SERVER="1000") as rt:
            await converse(rt, 120)
            await wait_embedded(rt)
            requests = len(fake.embedding_requests)
            assert rt.memory.indexer is not None and rt.memory.indexer.failures >= 1
            await converse(rt, 10, start=120)  # new turns: refused before any request
            await wait_embedded(rt)
            assert len(fake.embedding_requests) == requests
            assert await rt.store.embedding_count(KEY, MODEL) < 120
            assert (await rt.store.stats(KEY)).turns == 130  # memory goes on
    assert requests >= 1


async def test_edits_re_embed_and_deletes_and_reset_drop_vectors(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=lambda body: "ok", concepts=CONCEPTS) as fake:
        async with runtime(tmp_path, fake, EMBEDDING_MODEL=MODEL) as rt:
            await converse(rt, 10)
            await wait_embedded(rt)
            assert await rt.memory.edit(KEY, "c5", "we moved the party to Rio") == "updated"
            await wait_embedded(rt)
            assert fake.embedded_texts()[-1] == "we moved the party to Rio"
            assert await rt.store.embedding_count(KEY, MODEL) == 10
            near = await rt.store.nearest_turns(
                KEY, MODEL, _vector("Brazil party"), before_seq=99, limit=1)
            assert [t.message_id for t in near] == ["c5"]
            assert await rt.memory.delete(KEY, "c5") == "deleted"
            assert await rt.store.embedding_count(KEY, MODEL) == 9
            await rt.memory.reset(KEY)
            assert await rt.store.embedding_count(KEY, MODEL) == 0


async def test_old_turns_are_embedded_at_start_and_another_model_starts_over(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(responder=lambda body: "ok", concepts=CONCEPTS) as fake:
        async with runtime(tmp_path, fake) as rt:
            await converse(rt, 100)
        async with runtime(tmp_path, fake, EMBEDDING_MODEL=MODEL) as rt:
            await wait_embedded(rt)
            assert await rt.store.embedding_count(KEY, MODEL) == 100
        first = len(fake.embedding_requests)
        assert all(len((r.json or {})["input"]) <= 32 for r in fake.embedding_requests)
        async with runtime(tmp_path, fake, EMBEDDING_MODEL="embed-other") as rt:
            await wait_embedded(rt)
            assert await rt.store.embedding_count(KEY, "embed-other") == 100
        async with runtime(tmp_path, fake, EMBEDDING_MODEL=MODEL) as rt:
            await wait_embedded(rt)  # nothing left to embed for the first model
    assert len(fake.embedding_requests) == 2 * first


def _vector(text: str) -> bytes:
    from memory.embedding_store import pack
    from tests.fakes.openai_server import embedding

    return pack(embedding(text, CONCEPTS))


def test_a_ranking_whose_best_match_does_not_stand_out_is_dropped() -> None:
    from memory.embedding_store import SEPARATION_ROWS, nearest, pack

    rng = __import__("random").Random(7)
    noise = [(i, pack([1.0] + [rng.uniform(-0.05, 0.05) for _ in range(7)]))
             for i in range(SEPARATION_ROWS * 2)]
    query = pack([1.0, 0, 0, 0, 0, 0, 0, 0])
    assert nearest(query, noise, 5) == []  # every text looks alike to this model
    clear = [*noise, (999, pack([0.0, 1.0, 0, 0, 0, 0, 0, 0]))]
    assert nearest(pack([0.0, 1.0, 0, 0, 0, 0, 0, 0]), clear, 3)[0][0] == 999
    few = noise[: SEPARATION_ROWS - 1]
    assert len(nearest(query, few, 5)) == 5  # too few vectors to judge: ranked as they are


async def test_embeddings_without_reported_usage_are_metered_by_their_estimate(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(responder=lambda body: "ok", concepts=CONCEPTS) as fake:
        fake.report_usage = False  # a server that answers embeddings without ``usage``
        async with runtime(tmp_path, fake, EMBEDDING_MODEL=MODEL) as rt:
            await converse(rt, 20)
            await wait_embedded(rt)
            usage = await rt.features.quota.usage(KEY, "alice")
    server = next(counts for account, counts in usage.items() if account.user == "")
    assert server.get("embedding", 0) > 0  # counted, not free
