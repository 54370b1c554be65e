"""Slack's retries of an event arriving while the first delivery's post hangs.

Slack performs the placeholder's ``chat.postMessage`` (or the answer's ``chat.update``) and
then gives no answer; while the bot waits out its post timeout, Slack delivers the same
event again with ``X-Slack-Retry-Num`` 1, 2 and 3. The retries find the reply claimed and
answer nothing; the hung call is looked up (the post) or repeated (the edit) after the
timeout: one answer, no "thinking…" left. Real slack-bolt/slack_sdk against the loopback
Slack and OpenAI.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fakes.faults import Fault
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import faulty
from tests.harness.fault_matrix import ANSWER
from tests.harness.slack import KEY, mention, open_harness

POST_TIMEOUT = 2.0  # long enough for three retries to arrive while the call hangs


@pytest.mark.parametrize("method", ["chat.postMessage", "chat.update"])
async def test_retries_while_the_first_delivery_hangs_are_answered_once(
    method: str, tmp_path: Path, discord_llm: FakeOpenAI
) -> None:
    discord_llm.responder = lambda body: ANSWER
    env = {"OPENAI_BASE_URL": discord_llm.base_url, "MODEL_NAME": "gpt-test",
           "LLM_MAX_RETRIES": "0"}
    async with open_harness(tmp_path, None, env, post_timeout=POST_TIMEOUT) as h:
        h.fake.script(method, faulty(Fault.AFTER_HANG))
        event = mention("<@UBOT> when is the deploy window?", ts=f"{time.time():.6f}")
        assert await h.event(event) == 200
        await h.fake.wait_for(method)  # performed; no answer comes
        for retry in (1, 2, 3):
            assert await h.event(event, retry=retry) == 200
        await h.settle()
        assert [m.get("text") for m in h.fake.bot_messages(KEY.channel)] == [ANSWER]
        assert len(h.fake.calls_to("chat.postMessage")) == 1  # the placeholder, once
        assert len(discord_llm.chat_requests) == 1  # the model asked once
