"""Every outgoing platform call under every fault, counted as a person would see it.

Rows are the calls (``tests.harness.fault_matrix.ROWS``: reply posts, placeholders, their
edits and deletes, the chunks of a long answer, digests, public answers), columns the
faults of the fakes' switch (``tests.fakes.faults``: refused before the effect; done, then
500, a reset, a hang; 429 with Retry-After). Whatever the fault, the person sees exactly
the answer (each chunk once, no "thinking…" left), each digest and public answer once, and
no reply stays owed: an outcome that is unknown is looked up by its outbox identity before
anything is posted again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.faults import FAULTS, Fault
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import Answer
from tests.harness.fault_matrix import ANSWER, CONTAINING, POST_TIMEOUT, ROWS, Row, run_row
from tests.harness.slack import KEY, mention, open_harness


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
async def test_each_call_under_each_fault_is_seen_once(
    row: Row, fault: Fault, tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    seen = await run_row(row, fault, tmp_path, discord_fake=discord_fake,
                         discord_llm=discord_llm)
    if row.scene in CONTAINING:
        assert len(seen.texts) == 1 and seen.expected[0] in seen.texts[0], seen.texts
    else:
        assert seen.texts == seen.expected
    if row.scene == "refused":
        assert seen.whispers == 1  # told privately, once
    assert seen.owed == 0


async def test_slacks_fatal_error_after_a_post_is_an_unknown_outcome_and_looked_up(
    tmp_path: Path, discord_llm: FakeOpenAI
) -> None:
    """Slack's ``fatal_error`` says part of the call may have succeeded: the placeholder it
    was answered to is found, not posted again and left behind."""
    discord_llm.responder = lambda body: ANSWER
    env = {"OPENAI_BASE_URL": discord_llm.base_url, "MODEL_NAME": "gpt-test"}
    async with open_harness(tmp_path, None, env, post_timeout=POST_TIMEOUT) as h:
        h.fake.script("chat.postMessage", Answer(200, {"ok": False, "error": "fatal_error"},
                                                 perform=True))
        assert await h.event(mention("<@UBOT> when is the deploy window?")) == 200
        await h.settle()
        assert [m.get("text") for m in h.fake.bot_messages(KEY.channel)] == [ANSWER]
