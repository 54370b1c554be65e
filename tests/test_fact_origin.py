"""A carried identifier that a summary held and later dropped keeps the turn that stated it.

Issue 32: a speaker gives four identifiers that answer one question in a run of short
messages, naming the subject once. A bounded summary keeps them for a while, then drops
them one or two at a time in later compactions. Each is then carried verbatim; if it were
dated by the compaction that dropped it and described by a summary line, the four would no
longer look stated together and a small view would show only the one that names the
subject (``memory.relevance.rank_facts``).
"""

from __future__ import annotations

from pathlib import Path

from memory.config import MemoryConfig
from memory.identifiers import contains_identifier
from memory.manager import MemoryManager
from memory.models import CarriedIdentifier, ChannelKey, NewTurn
from memory.relevance import query_weights, rank_facts
from memory.stores.sqlite.store import SqliteStore
from memory.summarizer import Summarizer
from memory.summary_prompt import SummaryRequest
from memory.tokens import TokenCounter
from memory.window import WindowPolicy
from tests.fakes.models import ExtractiveModel

KEY = ChannelKey("slack", "T01", "C-office")
RUN = [("The old furniture goes to storage unit B-214.", "B-214"),
       ("gate code GATE-5521", "GATE-5521"),
       ("access card AC-33018", "AC-33018"),
       ("manager's cell +1-415-555-0199 if the gate is stuck", "+1-415-555-0199")]
FILLER = ["Any news on the move?", "Lunch first, then we look at it again.",
          "I think we should wait until Monday.", "Sounds good to me."]
PLANTED = {value for _, value in RUN}


def forget_old(text: str, request: SummaryRequest) -> str:
    """A bounded summary: it drops a planted identifier once its turn is no longer being
    folded (it was only in the previous summary), retries included."""
    for value in PLANTED:
        if not any(contains_identifier(said, value) for _, said in request.blocks):
            text = text.replace(value, "(it)")
    return text


async def test_a_dropped_identifier_keeps_its_turn_and_speaker(
        tmp_path: Path, tok: TokenCounter) -> None:
    store = SqliteStore(tmp_path / "origin.db", synchronous="OFF")
    await store.open()
    mgr = MemoryManager(store, Summarizer(ExtractiveModel(tok, rewrite=forget_old), tok,
                                          summary_tokens=300), tok,
                        WindowPolicy(max_messages=10, keep_messages=4),
                        config=MemoryConfig(retry_base=0.01))
    lines = [("Dana", FILLER[i % 4]) for i in range(12)]
    lines += [("Marco", text) for text, _ in RUN]
    lines += [("Dana" if i % 2 else "Eli", FILLER[i % 4] + f" ({i})") for i in range(40)]
    stated: dict[str, int] = {}
    try:
        for i, (speaker, text) in enumerate(lines):
            res = await mgr.record(NewTurn(KEY, f"m{i}", "user", speaker.lower(), speaker,
                                           text, 0, 1_700_000_000.0 + i))
            for said, value in RUN:
                if said == text:
                    stated[value] = res.turn.seq
            await mgr.wait_idle()
        state = await store.state(KEY)
    finally:
        await mgr.close()
        await store.close()

    facts = {f.value: f for f in state.facts}
    assert PLANTED <= set(facts), "the summary dropped them: each is carried"
    for text, value in RUN:
        fact = facts[value]
        assert fact.first_seq == stated[value], fact  # not the compaction that dropped it
        assert fact.context == f"Marco: {text}", fact
    # And so the four are stated together: a question naming the subject ranks them first,
    # before newer identifiers (Marco's included) that it does not ask about.
    newer = [CarriedIdentifier(f"OPS-{n}", f"{who}: ticket OPS-{n} for the gate rotation",
                               500 + n, 500 + n) for n, who in enumerate(["Eli", "Marco"] * 20)]
    weights = query_weights("What do we need to get at the old furniture in storage?")
    assert {f.value for f in rank_facts([*newer, *state.facts], weights)[:4]} == PLANTED
