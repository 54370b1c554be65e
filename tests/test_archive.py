"""Long-term memory (issue 9): episodes, channel facts, retrieval, /remember /memory /forget.

The model here (``tests.fakes.models.ArchiveModel``) is an in-process fake standing in for
both the summarizer and the reply model: its summaries keep only the newest topic (so the
rolling summary *loses* older details), it writes an episode and extracts "FACT:" messages
as long-term facts, marking a known fact with the same subject word as replaced. Replies
record the prompt they got.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.console_adapter import ConsoleChat, console_key
from bot.app import Runtime
from bot.conversation.prompts import FENCE_CLOSE, FENCE_OPEN
from bot.messages import IncomingMessage
from bot.settings import load_settings
from memory.models import ChannelKey
from memory.search_text import query_terms
from tests.fakes.models import ArchiveModel
from tests.harness.chat import ask as deliver

KEY = ChannelKey("test", "w1", "c1")
OTHER = ChannelKey("test", "w1", "c2")
TOPICS = ["weather", "lunch", "football", "music", "movies", "coffee", "gardening", "trains"]
_ids = itertools.count()


@contextlib.asynccontextmanager
async def runtime(tmp_path: Path, model: ArchiveModel, **env: str) -> AsyncIterator[Runtime]:
    # The message window (10 / 4): these tests count compactions and episodes by message.
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/archive.db",
                              "LLM_PROVIDER": "offline", "MAX_HISTORY_MESSAGES": "10", **env})
    async with Runtime.open(settings, llm=model) as rt:  # type: ignore[arg-type]
        yield rt


def msg(
    text: str,
    *,
    key: ChannelKey = KEY,
    who: str = "Alice",
    ask: bool = False,
    at: float = 1_700_000_000.0,
) -> IncomingMessage:
    return IncomingMessage(key, f"m{next(_ids)}", who.lower(), who, text, at, mentions_bot=ask)


def fence(prompt: str) -> str:
    """The fenced memory block of a reply's system prompt."""
    start, end = prompt.index(FENCE_OPEN), prompt.index(FENCE_CLOSE)
    return prompt[start:end]


async def ask(rt: Runtime, model: ArchiveModel, text: str, key: ChannelKey = KEY) -> str:
    reply = await deliver(rt, msg(text, key=key, who="Bob", ask=True))
    assert reply is not None and reply.text == "ok"
    return fence(model.prompts[-1])


async def chat(rt: Runtime, n: int, *, key: ChannelKey = KEY, start: int = 0) -> None:
    for i in range(start, start + n):
        topic = TOPICS[i % len(TOPICS)]
        await deliver(rt, msg(f"let us talk about {topic}", key=key, at=1e9 + i * 60))
        if i % 50 == 0:
            await rt.memory.wait_idle()
    await rt.memory.wait_idle()


async def test_a_fact_lost_by_the_summary_is_recalled_when_asked_and_only_then(
    tmp_path: Path,
) -> None:
    model = ArchiveModel()
    async with runtime(tmp_path, model) as rt:
        await chat(rt, 9)
        await deliver(rt, msg("FACT: the garage door password is blue heron"))  # 10
        await chat(rt, 588, start=10)
        state = await rt.store.state(KEY)
        assert "heron" not in state.text  # the rolling summary lost it long ago
        assert state.folded_through > 500
        assert model.summary_calls > 50

        unrelated = await ask(rt, model, "what should we have for dinner tonight?")
        assert "heron" not in unrelated
        related = await ask(rt, model, "what was the garage door password again?")
        assert "the garage door password is blue heron" in related
        assert "Recalled from the archive" in related


async def test_superseded_fact_is_ranked_after_its_update_and_marked(tmp_path: Path) -> None:
    model = ArchiveModel()
    async with runtime(tmp_path, model) as rt:
        await deliver(rt, msg("FACT: the deadline is Friday"))
        await chat(rt, 12)
        await deliver(rt, msg("FACT: the deadline moved to Monday", who="Carol"))
        await chat(rt, 12, start=12)
        found = await rt.store.search(KEY, query_terms("deadline"))
        assert [f.text for f in found.facts] == [
            "the deadline moved to Monday (Carol)",
            "the deadline is Friday (Alice)",
        ]
        monday, friday = found.facts
        assert friday.superseded_by == monday.id and monday.superseded_by is None
        assert monday.source_seqs and all(s > friday.source_seqs[0] for s in monday.source_seqs)

        prompt = await ask(rt, model, "when is the deadline?")
        lines = prompt.splitlines()
        # The fact lines (the messages that said them are recalled too, under their own heading)
        [new] = [i for i, line in enumerate(lines) if "moved to Monday" in line and "[fact" in line]
        [old] = [i for i, line in enumerate(lines) if "is Friday" in line and "[fact" in line]
        assert new < old
        assert "SUPERSEDED" in lines[old] and "SUPERSEDED" not in lines[new]


async def test_recall_never_crosses_channels(tmp_path: Path) -> None:
    model = ArchiveModel()
    async with runtime(tmp_path, model) as rt:
        await deliver(rt, msg("FACT: the vault combination is seven owls", key=OTHER))
        await chat(rt, 12, key=OTHER)
        await rt.features.memory_commands.remember(OTHER, "the vault is in the basement")
        assert len(await rt.memory.facts(OTHER)) == 2
        assert await rt.store.episodes(OTHER)
        await chat(rt, 12)
        prompt = await ask(rt, model, "where is the vault and what is its combination?")
        assert "owls" not in prompt and "basement" not in prompt
        assert "owls" in await ask(rt, model, "vault combination?", key=OTHER)


async def test_episodes_record_what_each_compaction_folded(tmp_path: Path) -> None:
    model = ArchiveModel()
    async with runtime(tmp_path, model) as rt:
        await chat(rt, 11)
        [episode] = await rt.store.episodes(KEY)
        turns = await rt.store.turns(KEY)
        folded = [t for t in turns if t.seq <= (await rt.store.state(KEY)).folded_through]
        assert (episode.first_seq, episode.last_seq) == (folded[0].seq, folded[-1].seq)
        assert (episode.started_at, episode.ended_at) == (folded[0].sent_at, folded[-1].sent_at)
        assert episode.speakers == ("Alice",)
        assert episode.text == f"Alice talked about {folded[-1].text.split()[-1]}"
        summary = (await rt.features.memory_commands.summary(KEY)).text
        assert ("Earlier stretches, folded into this summary and still searchable: "
                "9 Sep 2001 01:46–01:52 (UTC)") in summary  # not this year: with the year


async def test_a_missing_episode_block_falls_back_to_an_extractive_line(tmp_path: Path) -> None:
    model = ArchiveModel(blocks=False)
    async with runtime(tmp_path, model) as rt:
        await deliver(rt, msg("첫 번째 안건은 예산입니다. 나머지는 나중에.", who="민지"))
        await chat(rt, 10)
        [episode] = await rt.store.episodes(KEY)
        assert episode.text.startswith("민지: 첫 번째 안건은 예산입니다.")
        assert "Alice: let us talk about" in episode.text
        assert (await rt.store.state(KEY)).compactions == 1  # the compaction did not fail
        assert await rt.memory.facts(KEY) == []


async def test_korean_query_recalls_a_korean_fact(tmp_path: Path) -> None:
    model = ArchiveModel()
    async with runtime(tmp_path, model) as rt:
        await rt.features.memory_commands.remember(KEY, "프로젝트 마감은 금요일이에요",
                                                   author="민지")
        await rt.features.memory_commands.remember(KEY, "점심은 12시에 먹어요", author="민지")
        prompt = await ask(rt, model, "마감 언제였지?")
        assert "프로젝트 마감은 금요일이에요" in prompt and "점심" not in prompt


async def test_recall_tokens_zero_turns_retrieval_off(tmp_path: Path) -> None:
    model = ArchiveModel()
    async with runtime(tmp_path, model, RECALL_TOKENS="0") as rt:
        await rt.features.memory_commands.remember(KEY, "the garage door password is blue heron")
        assert "heron" not in await ask(rt, model, "garage door password?")


async def test_recall_stays_within_its_budget(tmp_path: Path) -> None:
    model = ArchiveModel()
    async with runtime(tmp_path, model, RECALL_TOKENS="60") as rt:
        for i in range(20):
            note = f"budget note {TOPICS[i % 8]} number {i} is long text"
            await rt.features.memory_commands.remember(KEY, note)
        await deliver(rt, msg("tell me the budget notes", ask=True))
        view = await rt.memory.view(KEY, rt.budget.memory_tokens,
                                    recall=True)
        assert 0 < view.recall_tokens <= 60
        assert 0 < len(view.recall.facts) < 20


async def test_archive_survives_restart(tmp_path: Path) -> None:
    model = ArchiveModel()
    async with runtime(tmp_path, model) as rt:
        await deliver(rt, msg("FACT: the garage door password is blue heron"))
        await chat(rt, 12)
        episodes = await rt.store.episodes(KEY)
        facts = await rt.memory.facts(KEY)
        assert episodes and facts
    async with runtime(tmp_path, model) as rt:
        assert await rt.store.episodes(KEY) == episodes
        assert await rt.memory.facts(KEY) == facts
        assert "blue heron" in await ask(rt, model, "garage door password?")


async def test_reset_removes_episodes_and_facts_of_that_channel_only(tmp_path: Path) -> None:
    model = ArchiveModel()
    async with runtime(tmp_path, model) as rt:
        for key in (KEY, OTHER):
            await deliver(rt, msg("FACT: the office plant is called Fern", key=key))
            await chat(rt, 12, key=key)
        result = await rt.features.memory_commands.reset(KEY, allowed=True)
        assert "1 archived episode," in result.text and "1 long-term fact " in result.text
        assert await rt.store.episodes(KEY) == [] and await rt.memory.facts(KEY) == []
        assert await rt.store.episodes(OTHER) and await rt.memory.facts(OTHER)
        assert "Fern" not in await ask(rt, model, "what is the plant called?")
        assert "Fern" in await ask(rt, model, "what is the plant called?", key=OTHER)


async def test_forget_is_refused_without_permission(tmp_path: Path) -> None:
    async with runtime(tmp_path, ArchiveModel()) as rt:
        fact = await rt.memory.remember(KEY, "keep me")
        refused = await rt.features.memory_commands.forget(KEY, str(fact.id), allowed=False)
        assert not refused.ok
        assert [f.id for f in await rt.memory.facts(KEY)] == [fact.id]
        done = await rt.features.memory_commands.forget(KEY, f"#{fact.id}", allowed=True)
        assert done.ok and await rt.memory.facts(KEY) == []


async def test_forget_by_text_needs_one_match(tmp_path: Path) -> None:
    async with runtime(tmp_path, ArchiveModel()) as rt:
        a = await rt.memory.remember(KEY, "Bob prefers tea")
        b = await rt.memory.remember(KEY, "Bob prefers green tea")
        several = await rt.features.memory_commands.forget(KEY, "prefers", allowed=True)
        assert not several.ok and f"#{a.id}" in several.text and f"#{b.id}" in several.text
        assert (await rt.features.memory_commands.forget(KEY, "bob prefers tea",
                                                         allowed=True)).ok  # exact
        assert [f.id for f in await rt.memory.facts(KEY)] == [b.id]
        assert not (await rt.features.memory_commands.forget(KEY, "nothing like it",
                                                             allowed=True)).ok
        assert not (await rt.features.memory_commands.forget(KEY, "999", allowed=True)).ok


async def test_console_remember_memory_forget(tmp_path: Path) -> None:
    async with runtime(tmp_path, ArchiveModel()) as rt:
        out = io.StringIO()
        console = ConsoleChat(
            rt.features, channel="ops", user="mina", stdin=io.StringIO(), stdout=out
        )
        other = ConsoleChat(
            rt.features, channel="elsewhere", user="mina", stdin=io.StringIO(), stdout=io.StringIO()
        )
        await other.handle("/remember not for ops")
        assert await console.handle("/remember the release train leaves on Thursday")
        assert await console.handle("/memory")
        [fact] = await rt.memory.facts(console_key("ops"))
        text = out.getvalue()
        assert f"Remembered as fact #{fact.id}" in text
        assert f"[fact #{fact.id}] the release train leaves on Thursday (pinned, mina)" in text
        assert "not for ops" not in text
        assert await console.handle(f"/forget {fact.id}")
        assert f"Forgot fact #{fact.id}" in out.getvalue()
        assert await rt.memory.facts(console_key("ops")) == []
        await console.handle("/memory")
        assert "no long-term facts" in out.getvalue()
        assert len(await rt.memory.facts(console_key("elsewhere"))) == 1
        await console.handle("/remember")
        assert "Tell me what to remember" in out.getvalue()


@pytest.mark.parametrize(
    "ref", ["²", "#²", "٣", "99999999999999999999999", "#9223372036854775808", "1" * 400]
)
async def test_forget_with_an_odd_number_answers_in_one_line(tmp_path: Path, ref: str) -> None:
    """``str.isdigit()`` accepts "²" (``int`` refuses it) and a number past 64 bits overflows
    the database's integer: both are "no such fact", never an error."""
    async with runtime(tmp_path, ArchiveModel()) as rt:
        kept = await rt.memory.remember(KEY, "keep me")
        result = await rt.features.memory_commands.forget(KEY, ref, allowed=True)
        assert not result.ok and result.text.startswith("I have no fact matching")
        assert "\n" not in result.text
        assert [f.id for f in await rt.memory.facts(KEY)] == [kept.id]
        out = io.StringIO()
        console = ConsoleChat(rt.features, channel="c", user="u", stdin=io.StringIO(), stdout=out)
        assert await console.handle(f"/forget {ref}")
        assert "I have no fact matching" in out.getvalue()
        assert "Traceback" not in out.getvalue() and "went wrong" not in out.getvalue()


async def test_forget_by_the_largest_id_is_no_such_fact(tmp_path: Path) -> None:
    async with runtime(tmp_path, ArchiveModel()) as rt:
        assert not (await rt.features.memory_commands.forget(KEY, str(2**63 - 1), allowed=True)).ok


@pytest.mark.parametrize("ref", ["", "  "])
async def test_forget_without_a_reference_asks_which(tmp_path: Path, ref: str) -> None:
    async with runtime(tmp_path, ArchiveModel()) as rt:
        assert not (await rt.features.memory_commands.forget(KEY, ref, allowed=True)).ok


async def test_common_terms_are_left_out_of_archive_queries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory.models import NewLongTermFact
    from memory.stores.sqlite import archive as sqlite_archive
    from memory.stores.sqlite.store import SqliteStore

    monkeypatch.setattr(sqlite_archive, "COMMON_TERM_DOCS", 3)
    key = ChannelKey("console", "local", "terms")
    async with SqliteStore(tmp_path / "terms.db") as store:
        for i in range(5):
            await store.add_fact(key, NewLongTermFact(f"release note {i}"), now=float(i))
        await store.add_fact(key, NewLongTermFact("release of `gistctl` slipped"), now=9.0)
        only_common = await store.search(key, ["release", "note"])
        assert only_common.facts == ()  # in more than 3 facts: too common to rank by
        found = await store.search(key, ["release", "gistctl"])
        assert [f.text for f in found.facts] == ["release of `gistctl` slipped"]
