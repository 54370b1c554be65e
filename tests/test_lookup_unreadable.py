"""A post of unknown outcome whose lookup cannot read Slack: looked up again, never posted
blind.

Slack performs ``chat.postMessage`` and answers 500; the bot looks the post up by its
outbox id (``conversations.replies`` in a thread, ``conversations.history`` in the
channel), and that read fails too — a 500 after the client's own retry, a reset after its
two (and aiohttp's own), a 429 after its three waits. "Could not read" is no "not there":
the placeholder, a long answer's second chunk and a digest each show once, and the answer
is not lost. Real slack-bolt/slack_sdk against the loopback Slack and OpenAI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.faults import Fault
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import Answer, faulty, rate_limited
from tests.harness.fault_matrix import ANSWER, POST_TIMEOUT, SLACK_SCENES
from tests.harness.slack import KEY, open_harness

READS = {  # a read that fails through every retry the client makes itself
    "500": [Answer(500, {"ok": False, "error": "internal_error"})] * 2,
    "reset": [faulty(Fault.AFTER_RESET)] * 4,  # aiohttp repeats a GET on a reused connection
    "429": [rate_limited(0)] * 4,
}
SCENES = {  # scene: (the n-th chat.postMessage made unknown, where its lookup reads)
    "reply": (0, "conversations.replies"),  # the "thinking…" placeholder
    "long reply": (1, "conversations.replies"),  # the second chunk
    "digest": (0, "conversations.history"),
}


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("scene", SCENES)
async def test_a_post_whose_lookup_cannot_read_is_not_posted_again_blind(
    scene: str, read: str, tmp_path: Path, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = lambda body: ANSWER
    env = {"OPENAI_BASE_URL": discord_llm.base_url, "MODEL_NAME": "gpt-test",
           "LLM_MAX_RETRIES": "0"}
    before, reader = SCENES[scene]
    async with open_harness(tmp_path, None, env, post_timeout=POST_TIMEOUT) as h:
        h.fake.script("chat.postMessage", *[Answer()] * before, faulty(Fault.AFTER_500))
        h.fake.script(reader, *READS[read])
        expected = await SLACK_SCENES[scene](h, discord_llm)
        texts = [str(m.get("text")) for m in h.fake.bot_messages(KEY.channel)]
    if scene == "digest":
        assert len(texts) == 1 and expected[0] in texts[0], texts
    else:
        assert texts == expected
