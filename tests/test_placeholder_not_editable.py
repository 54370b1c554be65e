"""A placeholder that cannot take the answer is taken away, never left beside it.

The answer goes into the "thinking…" placeholder with ``chat.update``. When that edit does
not take — refused before it took effect on every attempt, a 429 still there after the
client's waits, Slack's ``cant_update_message``, or done each time but answered 500 so
the rule gives up — the answer is posted on its own and the placeholder deleted: a person
sees the answer once and no "thinking…" (nor the answer twice, when the edit took effect
unseen). Real slack-bolt/slack_sdk against the loopback Slack and OpenAI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.conversation.lookup import ATTEMPTS
from tests.fakes.faults import Fault
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import Answer, api_error, faulty
from tests.harness.fault_matrix import ANSWER, POST_TIMEOUT
from tests.harness.slack import KEY, mention, open_harness

EDITS: dict[str, list[Answer]] = {
    "refused before, every attempt": [faulty(Fault.BEFORE)] * ATTEMPTS,
    "429 after the waits": [faulty(Fault.RATE_LIMITED)] * 4,
    "cant_update_message": [api_error("cant_update_message")],
    "done but 500, every attempt": [faulty(Fault.AFTER_500)] * ATTEMPTS,
}


@pytest.mark.parametrize("edit", EDITS)
async def test_a_placeholder_the_answer_cannot_go_into_is_deleted(
    edit: str, tmp_path: Path, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = lambda body: ANSWER
    env = {"OPENAI_BASE_URL": discord_llm.base_url, "MODEL_NAME": "gpt-test",
           "LLM_MAX_RETRIES": "0"}
    async with open_harness(tmp_path, None, env, post_timeout=POST_TIMEOUT) as h:
        h.fake.script("chat.update", *EDITS[edit])
        assert await h.event(mention("<@UBOT> when is the deploy window?")) == 200
        await h.settle()
        assert [m.get("text") for m in h.fake.bot_messages(KEY.channel)] == [ANSWER]
