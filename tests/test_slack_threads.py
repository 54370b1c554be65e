"""On Slack a thread is the reply chain: a mention in a thread of a busy channel gets the
thread's earlier messages into its prompt as the conversation it replies to, through the
real slack-bolt app against the loopback Slack (``conversations.replies``), the real
ChatService on real SQLite."""

from __future__ import annotations

import pytest

from adapters.slack import threads
from bot.conversation.chain import CHAIN_HEADING
from bot.conversation.prompts import FENCE_CLOSE
from tests.fakes.slack_api import Answer, api_error, rate_limited
from tests.harness.slack import FakeLLM, Harness, mention

THREAD = [  # a side discussion in a thread, Alice and Bob in turn
    "the kestrel migration needs a new storage bucket before friday",
    "we could reuse the falcon bucket from last spring",
    "falcon is read-only for the auditors though",
]
SMALL = {"CONTEXT_TOKENS": "2048", "REPLY_TOKENS": "256", "WINDOW_TOKENS": "200000",
         "KEEP_TOKENS": "100000"}


def chain_shown(prompt: list[dict[str, object]]) -> list[str]:
    system = str(prompt[0]["content"])
    if CHAIN_HEADING not in system:
        return []
    section = system.split(CHAIN_HEADING, 1)[1].split(FENCE_CLOSE, 1)[0]
    return [line for line in section.splitlines() if line.strip()]


@pytest.mark.parametrize("env_extra", [SMALL])
async def test_a_mention_in_a_thread_of_a_busy_channel_gets_the_thread(
    h: Harness, llm: FakeLLM
) -> None:
    parent = h.fake.post("C1", "U1", THREAD[0])
    assert await h.event(mention(THREAD[0], ts=parent["ts"], kind="message")) == 200
    for i, text in enumerate(THREAD[1:], 1):
        reply = h.fake.post("C1", "U2" if i % 2 else "U1", text, thread_ts=parent["ts"])
        assert await h.event(mention(text, ts=reply["ts"], kind="message", user=reply["user"],
                                     thread_ts=parent["ts"]), event_id=f"Ev{i}") == 200
    for i in range(100):  # the channel goes on meanwhile
        text = f"lunch today is at the noodle place on fourth street, table for {i} people"
        filler = h.fake.post("C1", "U3", text)
        assert await h.event(mention(text, ts=filler["ts"], kind="message", user="U3"),
                             event_id=f"Ev-f{i}") == 200
    ask = h.fake.post("C1", "U2", "<@UBOT> so which bucket?", thread_ts=parent["ts"])
    assert await h.event(mention(ask["text"], ts=ask["ts"], user="U2",
                                 thread_ts=parent["ts"]), event_id="Ev-ask") == 200
    await h.fake.wait_for("chat.update")
    await h.settle()
    (prompt,) = llm.prompts
    assert chain_shown(prompt) == [f"- {'Alice' if i % 2 == 0 else 'Bob'}: {text}"
                                   for i, text in enumerate(THREAD)]
    verbatim = " ".join(str(m["content"]) for m in prompt[1:])
    assert THREAD[0] not in verbatim  # it had left the recent turns: only the chain has it


@pytest.mark.parametrize("answer", [api_error("thread_not_found"), rate_limited(retry_after=30)],
                         ids=["refused", "rate-limited"])
async def test_a_thread_that_cannot_be_read_is_answered_without_it(
    h: Harness, llm: FakeLLM, answer: Answer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threads, "THREAD_WITHIN", 0.5)  # a 30 s Retry-After is too slow
    parent = h.fake.post("C1", "U1", THREAD[0])
    assert await h.event(mention(THREAD[0], ts=parent["ts"], kind="message")) == 200
    h.fake.script("conversations.replies", answer)
    ask = h.fake.post("C1", "U2", "<@UBOT> so which bucket?", thread_ts=parent["ts"])
    assert await h.event(mention(ask["text"], ts=ask["ts"], user="U2",
                                 thread_ts=parent["ts"]), event_id="Ev-ask") == 200
    update = (await h.fake.wait_for("chat.update"))[0].params
    await h.settle()
    assert update["text"] == llm.default
    (prompt,) = llm.prompts
    assert chain_shown(prompt) == []
    assert len(h.fake.calls_to("conversations.replies")) == 1
