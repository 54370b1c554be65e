"""``/catchup``'s engine on a real SQLite store: the period, the numbered citations and
their checks, threads, the bounded map-reduce of a long period, offline mode, Korean."""

from __future__ import annotations

import functools
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from adapters.discord.catchup import discord_link
from bot.catchup.command import Catchups, Where
from bot.catchup.gather import Catchup, Period, Scope
from bot.conversation.budget import Budget
from bot.errors import LLMUnavailable
from bot.llm.offline import OfflineLLM
from bot.settings.sections import DEFAULT_SYSTEM_PROMPT, BudgetSettings, CatchupSettings
from memory.models import ChannelKey, Turn
from memory.stores.sqlite.store import SqliteStore
from memory.tokens import TokenCounter
from tests.fakes.models import ScriptedModel
from tests.harness.catchup import cited_numbers, citing_answer, fill, links_in, resolve_links

KEY = ChannelKey("discord", "111", "222")
THREAD = ChannelKey("discord", "111", "333")
NOW = 1_790_000_000.0
START = NOW - 3600


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "c.db") as s:
        yield s


def model(*steps: object, then: object = None) -> ScriptedModel:
    m = ScriptedModel(*steps, then=then, purposes={"digest"})  # type: ignore[arg-type]
    m.is_offline = False  # type: ignore[attr-defined]
    m.name = "scripted"  # type: ignore[attr-defined]
    return m


async def discord_links(turns: Sequence[Turn]) -> Mapping[Turn, str]:
    return {t: discord_link(t) for t in turns}


def url_map(turns: Sequence[Turn]) -> dict[str, Turn]:
    return {discord_link(t): t for t in turns}


def engine(store: SqliteStore, llm: object, tok: TokenCounter, *, context_tokens: int = 8000,
           reply_tokens: int = 800, **config: int) -> Catchup:
    budget = Budget.compute(BudgetSettings(context_tokens=context_tokens,
                                           reply_tokens=reply_tokens), DEFAULT_SYSTEM_PROMPT, tok)
    return Catchup(store, llm, tok, CatchupSettings(**config), budget)  # type: ignore[arg-type]


CHAT = [
    ("Alice", "The release v2.4.0 goes out Friday, tag is on main."),
    ("Bob", "Then order ORD-5521 waits until Monday, I'll tell the customer."),
    ("Alice", "thanks!"),
    ("Carol", "Who reviews https://git.example.com/pr/88 before then?"),
    ("Bob", "I can review it tomorrow morning."),
]


async def test_short_period_is_one_call_and_every_link_resolves(
    store: SqliteStore, tok: TokenCounter
) -> None:
    turns = await fill(store, KEY, CHAT * 6, start=START)
    llm = model(functools.partial(citing_answer, per_call=6))
    result = await engine(store, llm, tok).run(
        Scope(KEY), Period(START, NOW, "last hour"), discord_links)
    assert llm.calls == 1
    links = links_in(result.text)
    assert len(links) == 6
    await resolve_links(store, links, [KEY], START, NOW, url_map(turns))
    assert "30 messages" in result.text.splitlines()[0]
    assert result.text.splitlines()[-1] == "Most active: Alice (12), Bob (12), Carol (6)"


async def test_invented_numbers_and_identifiers_are_removed(
    store: SqliteStore, tok: TokenCounter
) -> None:
    turns = await fill(store, KEY, CHAT, start=START)
    answer = "\n".join([
        "- Alice shipped v9.9.9 on Friday [1]",         # identifier not in message 1
        "- Bob will tell the customer about ORD-5521 [2, 99]",  # 99 is no message
        "- Dave quit [77]",                              # cites nothing that exists
        "- A review was asked for [4] and Bob offered [5]",
        "- Something nobody cited",
    ])
    result = await engine(store, model(answer), tok).run(
        Scope(KEY), Period(START, NOW, "x"), discord_links)
    assert [(b.text, b.cites) for b in result.bullets] == [
        ("Bob will tell the customer about ORD-5521", (2,)),
        ("A review was asked for and Bob offered", (4, 5)),
    ]
    assert "v9.9.9" not in result.text and "Dave" not in result.text
    await resolve_links(store, links_in(result.text), [KEY], START, NOW, url_map(turns))


async def test_a_citation_outside_the_period_is_dropped(
    store: SqliteStore, tok: TokenCounter
) -> None:
    before = await fill(store, KEY, [("Zed", "old news ZX-1")], start=START - 600, prefix="o")
    turns = await fill(store, KEY, CHAT, start=START)
    # the period's messages are numbered 1-5; "6" would be the old one if it were offered
    result = await engine(store, model("- old news ZX-1 [6]\n- release v2.4.0 [1]"), tok).run(
        Scope(KEY), Period(START, NOW, "x"), discord_links)
    assert [b.cites for b in result.bullets] == [(1,)]
    assert discord_link(before[0]) not in result.text
    await resolve_links(store, links_in(result.text), [KEY], START, NOW, url_map(turns))


async def test_threads_of_the_channel_are_included_and_linked_to_the_thread(
    store: SqliteStore, tok: TokenCounter
) -> None:
    main = await fill(store, KEY, CHAT[:2], start=START)
    thread = await fill(store, THREAD, [("Dana", "In the thread: rollback plan RB-7 is ready")],
                        start=START + 30, prefix="t")
    llm = model(functools.partial(citing_answer, per_call=5))
    result = await engine(store, llm, tok).run(
        Scope(KEY, {THREAD: "design"}), Period(START, NOW, "x"), discord_links)
    assert "(thread design)" in llm.received[0].messages[-1]["content"]
    assert "3 messages (1 in 1 thread)" in result.text
    links = links_in(result.text)
    assert discord_link(thread[0]) in links
    assert discord_link(thread[0]).startswith("https://discord.com/channels/111/333/")
    await resolve_links(store, links, [KEY, THREAD], START, NOW, url_map(main + thread))


async def test_long_period_is_bounded_map_reduce_within_the_budget(
    store: SqliteStore, tok: TokenCounter
) -> None:
    texts = [(f"P{i % 7}", f"Update {i}: ticket TK-{i} moved to review, see notes") for i in
             range(3000)]
    turns = await fill(store, KEY, texts, start=NOW - 3000 * 10, step=10)
    llm = model(then=citing_answer)
    cfg = {"context_tokens": 2000, "reply_tokens": 300, "max_map_calls": 6}
    result = await engine(store, llm, tok, **cfg).run(
        Scope(KEY), Period(NOW - 3000 * 10, NOW, "x"), discord_links)
    budget = 2000 - 300
    for call in llm.received:
        assert sum(tok.count(m["content"]) + 4 for m in call.messages) <= budget
    maps = [c for c in llm.received if cited_numbers(c)]
    assert len(maps) == 6
    assert len(llm.received) <= 6 + 4  # plus a bounded reduce
    assert result.calls == len(llm.received)
    assert "3,000 messages" in result.text and "most informative" in result.text
    links = links_in(result.text)
    assert links
    await resolve_links(store, links, [KEY], NOW - 30000, NOW, url_map(turns))


async def test_offline_mode_is_extractive_with_the_same_citations(
    store: SqliteStore, tok: TokenCounter
) -> None:
    turns = await fill(store, KEY, CHAT * 4, start=START)
    result = await engine(store, OfflineLLM(tok), tok).run(
        Scope(KEY), Period(START, NOW, "x"), discord_links)
    assert result.bullets and all(len(b.cites) == 1 for b in result.bullets)
    assert "thanks!" not in result.text  # courtesy is not a point
    cited = await resolve_links(store, links_in(result.text), [KEY], START, NOW, url_map(turns))
    for bullet, turn in zip(result.bullets, cited, strict=True):
        assert bullet.text.split(": ", 1)[1].rstrip(" …") in turn.text


async def test_a_failing_model_falls_back_to_quotes_with_citations(
    store: SqliteStore, tok: TokenCounter
) -> None:
    turns = await fill(store, KEY, CHAT, start=START)
    result = await engine(store, model(LLMUnavailable("down")), tok).run(
        Scope(KEY), Period(START, NOW, "x"), discord_links)
    assert "model failed" in result.text
    await resolve_links(store, links_in(result.text), [KEY], START, NOW, url_map(turns))


async def test_korean_conversation(store: SqliteStore, tok: TokenCounter) -> None:
    chat = [("지영", "배포는 금요일 오후 3시로 정했어요. 버전은 v3.1.0입니다."),
            ("민수", "주문번호 KR-20931 고객에게는 제가 연락할게요."),
            ("지영", "감사합니다!"),
            ("서연", "회의록은 https://wiki.example.kr/meeting/12 에 있어요.")]
    turns = await fill(store, KEY, chat, start=START)
    answer = ("- 배포는 금요일 오후 3시, 버전 v3.1.0 [1]\n- 민수가 KR-20931 고객에게 연락 [2]\n"
              "- 회의록: https://wiki.example.kr/meeting/12 [4]\n- 배포 버전은 v3.2.0 [1]")
    result = await engine(store, model(answer), tok).run(
        Scope(KEY), Period(START, NOW, "x"), discord_links)
    assert [b.cites for b in result.bullets] == [(1,), (2,), (4,)]  # v3.2.0 was invented
    assert "배포는 금요일" in result.text and "지영 (2)" in result.text
    await resolve_links(store, links_in(result.text), [KEY], START, NOW, url_map(turns))
    offline = await engine(store, OfflineLLM(tok), tok).run(
        Scope(KEY), Period(START, NOW, "x"), discord_links)
    assert "감사합니다" not in offline.text and "KR-20931" in offline.text


async def test_default_period_starts_after_the_callers_last_message(
    store: SqliteStore, tok: TokenCounter
) -> None:
    await fill(store, KEY, [("Erin", "I'm off for the afternoon"), *CHAT], start=START)
    await fill(store, THREAD, [("Erin", "one more thing in the thread")], start=START + 90,
               prefix="t")
    catchups = Catchups(engine(store, model(then=citing_answer), tok), store, ZoneInfo("UTC"),
                        clock=lambda: NOW)
    where = Where(KEY, {THREAD: "t"}, discord_links)
    period = await catchups.period(where, "erin", "", ZoneInfo("UTC"))
    assert period.start == pytest.approx(START + 90, abs=0.01)  # the thread post is later
    assert period.label.startswith("since your last message")
    fallback = await catchups.period(where, "nobody", "", ZoneInfo("UTC"))
    assert (fallback.start, fallback.label) == (NOW - 86400, "last 24 hours")
    result = await catchups.command(where, "erin", "")
    assert "· 4 messages" in result.text  # Bob, Alice, Carol, Bob after her thread post at +90 s
    assert "look further back" not in result.text  # something was said: no hint
    bad = await catchups.command(where, "erin", "next tuesday-ish")
    assert not bad.ok and "2h" in bad.text


async def test_nothing_since_your_last_message_says_how_to_look_further_back(
    store: SqliteStore, tok: TokenCounter
) -> None:
    # The first /catchup people try (at the console, always) comes right after their own
    # message: an empty period should not be the end of it.
    await fill(store, KEY, [*CHAT, ("Erin", "back now")], start=START)
    catchups = Catchups(engine(store, model(then=citing_answer), tok), store, ZoneInfo("UTC"),
                        clock=lambda: NOW)
    where = Where(KEY, {}, discord_links)
    result = await catchups.command(where, "erin", "")
    assert "Nothing was said here in that period." in result.text
    assert result.text.endswith("To look further back: /catchup 2h, /catchup yesterday or "
                                "/catchup 3 days ago.")
    asked = await catchups.command(where, "erin", "1m")  # a period of their choosing
    assert "look further back" not in asked.text


def test_heading_names_the_zone_and_period() -> None:
    from bot.catchup.text import heading

    text = heading("Catch-up", NOW - 7200, NOW, "since 2h", [], ZoneInfo("Asia/Seoul"))
    assert re.search(r"since 2h: \w{3} \d\d \w{3} \d\d:\d\d – \d\d:\d\d \(Asia/Seoul\)", text)
    assert time.time() > 0


async def test_console_catchup_cites_plain_references(tmp_path: Path) -> None:
    import io

    from adapters.console_adapter import ConsoleChat
    from bot.app import Runtime
    from bot.settings import load_settings

    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/c.db"}, env_file=None)
    async with Runtime.open(settings) as rt:
        out = io.StringIO()
        chat = ConsoleChat(rt.features, channel="ops", user="erin", stdin=io.StringIO(),
                           stdout=out)
        for line in ("deploy v2.4.0 went out at noon", "ticket OPS-4411 tracks the rollback"):
            await chat.handle(line)
        await chat.handle("/catchup 1h")
        text = out.getvalue().split("**Catch-up**", 1)[1]
        assert "2 messages" in text and "Most active: erin (2)" in text
        assert re.search(r"\[\d: erin \d\d:\d\d\]", text)
        await chat.handle("/digest daily 09:00 Asia/Seoul")
        assert "Daily digest at 09:00 (Asia/Seoul)" in out.getvalue()
        await chat.handle("/catchup whenever")
        assert "I can't read 'whenever'" in out.getvalue()


async def test_a_reduce_step_that_invents_a_citation_loses_it(
    store: SqliteStore, tok: TokenCounter
) -> None:
    texts = [(f"P{i % 3}", f"item {i}: ticket TK-{1000 + i} closed") for i in range(400)]
    turns = await fill(store, KEY, texts, start=NOW - 4000, step=10)

    def respond(call: object) -> str:
        user = call.messages[-1]["content"]  # type: ignore[attr-defined]
        if user.startswith("Points:"):  # reduce: one real point, one number it never saw
            first = user.splitlines()[1]
            return f"{first}\n- ticket TK-1399 closed [400]\n- ticket TK-1001 closed [2]"
        return citing_answer(call, per_call=2)  # type: ignore[arg-type]

    llm = model(then=respond)
    result = await engine(store, llm, tok, context_tokens=1500, reply_tokens=200,
                          max_map_calls=8).run(
        Scope(KEY), Period(NOW - 4000, NOW, "x"), discord_links)
    reduce_inputs = [c.messages[-1]["content"] for c in llm.received
                     if c.messages[-1]["content"].startswith("Points:")]
    assert reduce_inputs, "a long period goes through reduce"
    offered = {int(n) for text in reduce_inputs for n in re.findall(r"\[(\d+)", text)}
    assert 400 not in offered
    for bullet in result.bullets:
        assert set(bullet.cites) <= offered, bullet
    assert "TK-1399" not in result.text
    await resolve_links(store, links_in(result.text), [KEY], NOW - 4000, NOW, url_map(turns))


async def test_since_a_message_link_starts_at_that_message(
    store: SqliteStore, tok: TokenCounter
) -> None:
    turns = await fill(store, KEY, CHAT, start=START)
    link_id = ((int(turns[3].sent_at * 1000) - 1_420_070_400_000) << 22) | 1
    catchups = Catchups(engine(store, model(then=citing_answer), tok), store, ZoneInfo("UTC"),
                        clock=lambda: NOW)
    result = await catchups.command(
        Where(KEY, {}, discord_links), "bob", f"https://discord.com/channels/111/222/{link_id}")
    assert "since that message" in result.text and "· 2 messages" in result.text
