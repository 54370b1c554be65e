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
from tests.harness.fault_matrix import CONTAINING, ROWS, Row, run_row


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
