"""``MODEL_PARAMS`` and a channel's ``params``: request fields that reach the request body
through the real ``openai`` SDK against the loopback fake, refused at start or by ``/config``
when they are not JSON, not an object, or fields gistbot sets itself or the operator did
not allow; summaries get ``SUMMARY_MODEL_PARAMS``, never the reply's."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.channels.config_command import Caller, parse_config
from bot.doctor import doctor
from bot.errors import ConfigError
from bot.settings import load_settings
from memory.models import ChannelKey
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.harness.chat import ask
from tests.harness.service import KEY, bodies, msg, runtime

OPERATOR = Caller("u1", "Ops", may_channel=True, may_server=True)
PARAMS = '{"temperature": 0.7, "repetition_penalty": 1.1}'


@pytest.mark.parametrize("stream", ["false", "true"])
async def test_model_params_reach_the_reply_request_through_the_sdk(
    tmp_path: Path, stream: str
) -> None:
    async with FakeOpenAI() as fake, runtime(tmp_path, fake, MODEL_PARAMS=PARAMS,
                                             STREAM_REPLIES=stream) as rt:
        fake.push("hello")
        reply = await ask(rt, msg(1, "hi bot", mention=True))
    assert reply is not None and reply.text == "hello"
    [body] = bodies(fake, summary=False)
    assert body["temperature"] == 0.7  # a named argument of create()
    assert body["repetition_penalty"] == 1.1  # a server's own field, through extra_body
    assert body["messages"][-1]["content"].endswith("hi bot")  # the messages still there
    assert body["model"] == "gpt-test"


@pytest.mark.parametrize(("value", "says"), [
    ("temperature=0.7", "is not JSON"),
    ("[0.7]", "must be a JSON object"),
    ('{"messages": []}', "messages, which gistbot sets itself"),
    ('{"model": "gpt-4o", "temperature": 1}', "model, which gistbot sets itself"),
    ('{"stream": true}', "stream, which gistbot sets itself"),
    ('{"max_tokens": 50}', "max_tokens, which gistbot sets itself"),
    ('{"n": 2}', "n, which would make the answer something other than one text"),
    ('{"tools": []}', "tools, which would make the answer something other than one text"),
    ('{"temperature": "hot"}', "temperature must be a number"),
])
@pytest.mark.parametrize("variable", ["MODEL_PARAMS", "SUMMARY_MODEL_PARAMS"])
def test_bad_model_params_stop_the_start_naming_the_variable(
    variable: str, value: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({variable: value})
    line = next(ln.strip() for ln in str(caught.value).splitlines() if variable in ln)
    assert line.startswith(f"{variable}: ") and says in line


async def test_summaries_get_summary_model_params_not_the_replys(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, runtime(
        tmp_path, fake, MODEL_PARAMS='{"temperature": 1.3}',
        SUMMARY_MODEL_PARAMS='{"temperature": 0.1, "chat_template_kwargs": '
                             '{"enable_thinking": false}}',
        MAX_HISTORY_MESSAGES="4", KEEP_RECENT_MESSAGES="1",
    ) as rt:
        for i in range(1, 7):
            await ask(rt, msg(i, f"note {i}: the deploy is on Friday"))
        await rt.memory.wait_idle()
        await ask(rt, msg(9, "when is the deploy?", mention=True))
    summaries, replies = bodies(fake, summary=True), bodies(fake, summary=False)
    assert summaries and replies
    assert all(b["temperature"] == 0.1 for b in summaries)
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in summaries)
    assert all(b["temperature"] == 1.3 and "chat_template_kwargs" not in b for b in replies)


async def test_a_channels_params_go_over_model_params_within_the_allowlist(
    tmp_path: Path,
) -> None:
    other = ChannelKey("test", "w1", "c2")
    async with FakeOpenAI() as fake, runtime(tmp_path, fake, MODEL_PARAMS=PARAMS) as rt:
        configure = rt.features.config_command.configure
        answer = await configure(KEY, parse_config("set params temperature=0.2 top_p=0.5"),
                                 OPERATOR)
        assert answer.ok, answer.text
        fake.push("here", "there")
        await ask(rt, msg(1, "hi", mention=True))
        await ask(rt, msg(2, "hi", mention=True, key=other))
        shown = await configure(KEY, parse_config("show"), OPERATOR)
    here, there = bodies(fake, summary=False)
    assert (here["temperature"], here["top_p"], here["repetition_penalty"]) == (0.2, 0.5, 1.1)
    assert (there["temperature"], "top_p" in there) == (0.7, False)  # another channel: env
    assert '- params: {"temperature": 0.2, "top_p": 0.5}  (channel)' in shown.text


@pytest.mark.parametrize(("words", "says"), [
    ("set params seed=3", "may not set seed here; allowed: temperature, top_p"),
    ('set params {"temperature": 0.2, "repetition_penalty": 2}',
     "may not set repetition_penalty here"),
    ("set params max_tokens=9000", "max_tokens, which gistbot sets itself"),
    ("set params temperature", "JSON or as key=value pairs"),
    ("set params temperature=warm", "temperature must be a number"),
])
async def test_a_channel_may_not_set_params_outside_the_allowlist(
    tmp_path: Path, words: str, says: str
) -> None:
    async with FakeOpenAI() as fake, runtime(tmp_path, fake, MODEL_PARAMS=PARAMS) as rt:
        answer = await rt.features.config_command.configure(KEY, parse_config(words), OPERATOR)
        fake.push("hello")
        await ask(rt, msg(1, "hi", mention=True))
        stored = await rt.storage.settings.scope_settings(KEY)
    assert not answer.ok and says in answer.text
    assert stored == []
    [body] = bodies(fake, summary=False)
    assert body["temperature"] == 0.7 and "seed" not in body


async def test_model_params_allowed_widens_what_a_channel_may_set(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake, runtime(tmp_path, fake,
                                             MODEL_PARAMS_ALLOWED="temperature,seed") as rt:
        answer = await rt.features.config_command.configure(
            KEY, parse_config('set params {"seed": 7}'), OPERATOR)
        fake.push("hello")
        await ask(rt, msg(1, "hi", mention=True))
    assert answer.ok, answer.text
    [body] = bodies(fake, summary=False)
    assert body["seed"] == 7


async def test_doctors_test_answer_carries_model_params(tmp_path: Path) -> None:
    """So a field the endpoint refuses shows in ``gistbot doctor``, not first in a reply."""
    async with FakeOpenAI(responder=lambda _: "OK") as fake:
        settings = load_settings({"OPENAI_BASE_URL": fake.base_url, "MODEL_NAME": "gpt-test",
                                  "DATABASE_URL": f"sqlite:///{tmp_path}/t.db",
                                  "MODEL_PARAMS": PARAMS})
        status = await doctor(settings, io.StringIO())
    assert status == 0
    [body] = [r.json for r in fake.chat_requests if r.json is not None]
    assert (body["temperature"], body["repetition_penalty"]) == (0.7, 1.1)
