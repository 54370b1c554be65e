"""The fakes' one fault switch (``tests.fakes.faults``) does what it says on every fake,
seen through the real clients: a fault ``BEFORE`` leaves no effect, the ``AFTER_*`` ones
leave the effect and lose the answer (500, a reset, a hang), and a 429 carries
``Retry-After`` and leaves no effect."""

from __future__ import annotations

import aiohttp
import openai
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.faults import FAULTS, Fault
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack, faulty
from tests.harness.discord import TOKEN, W

SHORT = 0.5  # seconds the clients wait for an answer (a hang ends there)


def failure(fault: Fault) -> tuple[type[BaseException], ...]:
    """What a client without retries sees."""
    if fault is Fault.AFTER_RESET:
        return (aiohttp.ClientConnectionError,)
    if fault is Fault.AFTER_HANG:
        return (TimeoutError,)
    return (SlackApiError,)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
async def test_slack_performs_then_fails_as_switched(fault: Fault) -> None:
    async with FakeSlack() as fake:
        fake.script("chat.postMessage", faulty(fault))
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url,
                                timeout=SHORT, retry_handlers=[])  # type: ignore[arg-type]
        with pytest.raises(failure(fault)) as raised:
            await client.chat_postMessage(channel="C1", text="once")
        if isinstance(raised.value, SlackApiError):
            status = 429 if fault is Fault.RATE_LIMITED else 500
            assert raised.value.response.status_code == status
        assert len(fake.bot_messages("C1")) == (1 if fault.performs else 0)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
async def test_discord_performs_then_fails_as_switched(fault: Fault) -> None:
    async with FakeDiscord() as fake, aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=SHORT)) as http:
        fake.script("POST /channels/{id}/messages", fault)
        url = f"{fake.api_base}/channels/{W.general}/messages"
        headers = {"Authorization": f"Bot {TOKEN}"}
        try:
            async with http.post(url, json={"content": "once"}, headers=headers) as r:
                status = r.status
                retry_after = r.headers.get("Retry-After")
        except (aiohttp.ClientConnectionError, TimeoutError) as e:
            assert fault.cuts, e
        else:
            assert status == (429 if fault is Fault.RATE_LIMITED else 500)
            assert (retry_after is not None) == (fault is Fault.RATE_LIMITED)
        assert len(fake.history(W.general)) == (1 if fault.performs else 0)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
async def test_openai_fails_as_switched_then_answers(fault: Fault) -> None:
    expected = {Fault.RATE_LIMITED: openai.RateLimitError,
                Fault.AFTER_RESET: openai.APIConnectionError,
                Fault.AFTER_HANG: openai.APITimeoutError}.get(fault, openai.InternalServerError)
    async with FakeOpenAI() as fake:
        fake.push(fault, "fine")
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0,
                                    timeout=SHORT)
        ask = [{"role": "user", "content": "hi"}]
        with pytest.raises(expected):
            await client.chat.completions.create(model="m", messages=ask)  # type: ignore[arg-type]
        answer = await client.chat.completions.create(model="m", messages=ask)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "fine"
        await client.close()
