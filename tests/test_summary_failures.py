"""``/summary`` says what actually happened when the summary model fails.

Driven through the real ``openai`` SDK against the loopback fake: an endpoint that answers
500 (unreachable after retries), one that hangs past the timeout, and one whose answer is
junk. Each keeps the stored summary and names its cause; none says a generic
"unavailable" for an answer that did arrive.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.memory_commands.feature import digest_failure
from memory.errors import SummaryRejected
from tests.fakes.openai_server import Error, FakeOpenAI, Hang, Text
from tests.harness.chat import ask
from tests.harness.service import KEY, msg, runtime


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (Error(500, {"error": {"message": "boom"}}), "could not be reached"),
        (Hang(5.0), "did not answer in time"),
        (Text("Sorry, I can't help with that request. An error occurred."), "unusable"),
    ],
)
async def test_summary_names_the_failure(tmp_path: Path, answer: object, said: str) -> None:
    async with FakeOpenAI(strict=False) as fake, runtime(
        tmp_path, fake, MAX_HISTORY_MESSAGES="1000", LLM_TIMEOUT="1", SUMMARY_TIMEOUT="1"
    ) as rt:
        await ask(rt, msg(1, "The release is v2.7.1, order ORD-2041."))
        fake.push(answer)  # type: ignore[arg-type]
        text = (await rt.features.memory_commands.summary(KEY)).text
    assert said in text, text
    assert "this is the stored summary" in text
    assert "unavailable" not in text


def test_each_cause_has_its_own_sentence() -> None:
    from bot.errors import LLMAuthError, LLMTimeout, LLMUnavailable

    sentences = {digest_failure(e) for e in (
        TimeoutError(), LLMTimeout("t"), SummaryRejected("junk"), LLMUnavailable("down"),
        LLMAuthError("key"), RuntimeError("other"),
    )}
    assert len(sentences) == 5  # the two timeouts say the same thing
