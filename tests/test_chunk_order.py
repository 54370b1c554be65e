"""A long answer's parts stand in order, even when one of them could not be posted.

Slack refuses the second part three times over (HTTP 500 before anything happened, each
looked up and not found): the reply is not delivered and stays owed. The parts after the
gap are not posted past it; the missed-mention sweep's late answer skips the part already
recorded and posts the rest, so a person reads part 1, 2, 3 — never 3 above 2. Real
slack-bolt/slack_sdk against the loopback Slack and OpenAI.
"""

from __future__ import annotations

import time
from pathlib import Path

from adapters.slack.text import format_reply
from bot.conversation.lookup import ATTEMPTS
from bot.conversation.sweep import sweep_missed
from tests.fakes.faults import Fault
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import Answer, faulty
from tests.harness.fault_matrix import LONG, POST_TIMEOUT
from tests.harness.slack import KEY, mention, open_harness


async def test_a_part_that_could_not_be_posted_is_not_overtaken_by_the_next(
    tmp_path: Path, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = lambda body: LONG
    env = {"OPENAI_BASE_URL": discord_llm.base_url, "MODEL_NAME": "gpt-test",
           "LLM_MAX_RETRIES": "0"}
    parts = format_reply(LONG, {})
    assert len(parts) == 3
    async with open_harness(tmp_path, None, env, post_timeout=POST_TIMEOUT) as h:
        # the placeholder, then the second part refused before it took effect, every attempt
        h.fake.script("chat.postMessage", Answer(), *[faulty(Fault.BEFORE)] * ATTEMPTS)
        now = f"{time.time():.6f}"  # young enough for the missed-mention sweep
        assert await h.event(mention("<@UBOT> the whole plan, please", ts=now)) == 200
        await h.settle()
        shown = [m.get("text") for m in h.fake.bot_messages(KEY.channel)]
        assert shown == parts[:1]  # the first, in the placeholder; nothing past the gap
        assert await sweep_missed(h.rt.features, "slack", h.adapter.events.flow) == 1
        assert [m.get("text") for m in h.fake.bot_messages(KEY.channel)] == parts
