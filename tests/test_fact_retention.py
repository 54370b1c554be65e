"""Fact retention: identifiers survive a summarizer that drops every one of them.

A scripted 300-turn conversation between four people and the bot (English, Korean and a
Japanese line) plants 24 identifiers: order and ticket ids, URLs, e-mail addresses,
backticked names, amounts, a phone number, a date, a hash and a UUID. It is compacted more
than ten times by a model that removes every identifier from its answers, including the
retry that asks for them by name. At the end every planted identifier is still in memory,
carried verbatim in the facts table, with the sentence and speaker it came from.
"""

from __future__ import annotations

import re
from pathlib import Path

from memory.config import MemoryConfig
from memory.identifiers import contains_identifier, extract_identifiers
from memory.manager import MemoryManager
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.summary_prompt import SummaryRequest
from memory.tokens import TokenCounter
from memory.window import WindowPolicy
from tests.fakes.models import ExtractiveModel

KEY = ChannelKey("slack", "T01", "C-support")

# (speaker, line, planted identifier); the identifier must be what the line yields
PLANTED: list[tuple[str, str, str]] = [
    ("Alice", "My order ORD-1042 still has not shipped.", "ORD-1042"),
    ("Bob", "I opened ticket INC0012345 for it.", "INC0012345"),
    ("Bob", "Status page: https://status.example.com/incidents/42 has the details.",
     "https://status.example.com/incidents/42"),
    ("Carol", "Escalations go to ops-team@example.com please.", "ops-team@example.com"),
    ("Alice", "The warehouse job is called `blue-fox` internally.", "blue-fox"),
    ("Bob", "Refund would be 12,500 in store credit.", "12,500"),
    ("민수", "제 연락처는 010-1234-5678 입니다.", "010-1234-5678"),
    ("민수", "주문번호 ORD-7731로 문의드립니다. 배송이 너무 늦어요.", "ORD-7731"),
    ("Carol", "This is the same bug as #4411 on the tracker.", "#4411"),
    ("Bob", "The fix landed in commit a1b2c3d yesterday.", "a1b2c3d"),
    ("Alice", "We agreed the cutoff is 2024-06-11 for the migration.", "2024-06-11"),
    ("Carol", "Their SLA credit formula is in v3.14.159 of the contract.", "v3.14.159"),
    ("Bob", "Tracking the rollout in JIRA-2048.", "JIRA-2048"),
    ("Carol", "Docs are at www.example.org/docs/refunds for reference.",
     "www.example.org/docs/refunds"),
    ("Alice", "Next release is `release-train-7`, do not forget.", "release-train-7"),
    ("민수", "예산은 99,000원으로 확정했습니다.", "99,000원"),
    ("민수", "담당자 메일은 minji.kim@example.kr 입니다.", "minji.kim@example.kr"),
    ("Bob", "The customer record is 123e4567-e89b-12d3-a456-426614174000 in the CRM.",
     "123e4567-e89b-12d3-a456-426614174000"),
    ("Carol", "Review PR-512 before Friday.", "PR-512"),
    ("Alice", "Config lives in `gistbot.toml` on the box.", "gistbot.toml"),
    ("Bob", "We have 45000 tickets in the backlog.", "45000"),
    ("Carol", "Patch is https://github.com/acme/widgets/pull/512 if you want to look.",
     "https://github.com/acme/widgets/pull/512"),
    ("Yuki", "チケット番号はINC0099887です。よろしくお願いします。", "INC0099887"),
    ("Yuki", "Phone me at +81-3-1234-5678 when it ships.", "+81-3-1234-5678"),
]
FILLER: list[tuple[str, str]] = [
    ("Alice", "Any news on this?"),
    ("Bob", "Let me check with the warehouse team."),
    ("Carol", "Sounds good to me."),
    ("민수", "네, 알겠습니다. 감사합니다!"),
    ("민수", "혹시 진행 상황 공유해 주실 수 있나요?"),
    ("Yuki", "了解しました。"),
    ("Alice", "Thanks, that helps a lot."),
    ("Bob", "I think we should wait until Monday."),
    ("Carol", "Lunch first, then we look at it again."),
    ("gistbot", "Noted. I will keep that in mind."),
]
REMIND_AT = 250  # ORD-1042 comes up again late: its fact's last mention must move


def conversation() -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    planted = iter(PLANTED)
    for i in range(300):
        if i == REMIND_AT:
            lines.append(("Alice", "Reminder: ORD-1042 is still not here!"))
        elif i % 11 == 3 and (item := next(planted, None)) is not None:
            lines.append((item[0], item[1]))
        else:
            lines.append(FILLER[(i * 7) % len(FILLER)])
    assert next(planted, None) is None, "every planted line is in the conversation"
    return lines


def strip_identifiers(text: str, request: SummaryRequest) -> str:
    """The misbehaving model: its summary keeps the prose and loses every identifier."""
    del request
    for _ in range(5):  # removing one can expose another (a number inside a URL, say)
        idents = extract_identifiers(text)
        if not idents:
            break
        for ident in sorted(idents, key=len, reverse=True):
            text = text.replace(f"`{ident}`", "(a name)").replace(ident, "(something)")
    text = re.sub(r"[0-9]", "", text)  # and every stray digit, to be sure
    return text.strip() or "## Topics\n- people talked"


async def test_every_planted_identifier_survives(tmp_path: Path, tok: TokenCounter) -> None:
    for _, line, ident in PLANTED:
        assert ident in extract_identifiers(line), (line, extract_identifiers(line))
    model = ExtractiveModel(tok, rewrite=strip_identifiers)
    store = SqliteStore(tmp_path / "facts.db", synchronous="OFF")
    await store.open()
    mgr = MemoryManager(store, Summarizer(model, tok, summary_tokens=300), tok,
                        WindowPolicy(max_messages=10, keep_messages=4),
                        config=MemoryConfig(facts_tokens=200, retry_base=0.01))
    seq_of: dict[str, int] = {}
    try:
        for i, (speaker, text) in enumerate(conversation()):
            role = "assistant" if speaker == "gistbot" else "user"
            res = await mgr.record(NewTurn(KEY, f"msg{i}", role, speaker.lower(), speaker,
                                           text, 0, 1_700_000_000.0 + i))
            for ident in extract_identifiers(text):
                seq_of.setdefault(ident, res.turn.seq)
            if "Reminder" in text:
                remind_seq = res.turn.seq
            await mgr.wait_idle()  # one compaction at a time, as a quiet channel would see

        state = await store.state(KEY, facts_limit=10_000)
        stats = await mgr.stats(KEY)
    finally:
        await mgr.close()
        await store.close()

    assert mgr.compactions >= 10 and mgr.compaction_failures == 0
    assert stats.turns == 300 and stats.folded >= 290
    # the model really dropped them: first answers and retries alike
    retries = [r for r in model.requests if r.missing]
    assert len(retries) >= 10
    assert not any(contains_identifier(state.text, ident) for _, _, ident in PLANTED)

    facts = {f.value: f for f in state.facts}
    for speaker, _, ident in PLANTED:
        assert contains_identifier(state.text, ident) or ident in facts, ident
        fact = facts[ident]
        assert ident in fact.context and speaker in fact.context, fact
        assert fact.first_seq == seq_of[ident]
    order = facts["ORD-1042"]
    assert (order.first_seq, order.last_seen_seq) == (seq_of["ORD-1042"], remind_seq)
    # the most recently mentioned facts come first (what a reply prompt sees within its bound)
    lasts = [f.last_seen_seq for f in state.facts]
    assert lasts == sorted(lasts, reverse=True)
    assert model.purposes == ["summary"] * model.calls
