"""Named providers: each channel's model picks its endpoint and key (two loopback fakes
behind the real ``openai`` SDK, the Authorization header checked), a dead or hung provider
holds up only its own channels, ``gistbot doctor`` checks each endpoint, and ``PROVIDERS``
that cannot work stop the start naming the variable."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import Runtime
from bot.channels.config_command import Caller, parse_config
from bot.doctor import doctor
from bot.errors import ConfigError
from bot.settings import Settings, load_settings
from memory.models import ChannelKey
from tests.fakes.openai_server import FakeOpenAI, Hang
from tests.harness.chat import ask
from tests.harness.service import bodies, msg

HOSTED_KEY = "sk-hosted-4f9a1c2e7b"
OTHER = ChannelKey("test", "w1", "c2")
OPERATOR = Caller("u1", "Ops", may_channel=True, may_server=True)


def two_providers(tmp_path: Path, local: FakeOpenAI, hosted: FakeOpenAI,
                  **env: str) -> Settings:
    """A local server (no key) serving llama3.1 and a hosted one serving gpt-4o; no default
    endpoint, so every model must be one of theirs."""
    providers = {
        "local": {"base_url": local.base_url, "models": ["llama3.1"]},
        "hosted": {"base_url": hosted.base_url, "api_key": HOSTED_KEY, "models": ["gpt-4o"]},
    }
    return load_settings({
        "PROVIDERS": json.dumps(providers),
        "MODEL_NAME": "llama3.1",
        "DATABASE_URL": f"sqlite:///{tmp_path}/t.db",
        "LLM_MAX_RETRIES": "0",
        "LLM_TIMEOUT": "30",
        **env,
    })


@contextlib.asynccontextmanager
async def fakes() -> AsyncIterator[tuple[FakeOpenAI, FakeOpenAI]]:
    async with FakeOpenAI(models=("llama3.1",)) as local, \
            FakeOpenAI(models=("gpt-4o",)) as hosted:
        yield local, hosted


def authorization(fake: FakeOpenAI) -> set[str]:
    return {r.headers["Authorization"] for r in fake.chat_requests}


async def test_each_channel_is_answered_by_its_models_provider_with_its_key(
    tmp_path: Path,
) -> None:
    async with fakes() as (local, hosted), \
            Runtime.open(two_providers(tmp_path, local, hosted)) as rt:
        answer = await rt.features.config_command.configure(
            OTHER, parse_config("set model gpt-4o"), OPERATOR)
        assert answer.ok, answer.text
        local.push("from llama")
        hosted.push("from gpt-4o")
        here = await ask(rt, msg(1, "hi", mention=True))
        there = await ask(rt, msg(2, "hi", mention=True, key=OTHER))
    assert here is not None and here.text == "from llama"
    assert there is not None and there.text == "from gpt-4o"
    assert [b["model"] for b in bodies(local, summary=False)] == ["llama3.1"]
    assert [b["model"] for b in bodies(hosted, summary=False)] == ["gpt-4o"]
    assert authorization(local) == {"Bearer no-key-required"}  # never the hosted key
    assert authorization(hosted) == {f"Bearer {HOSTED_KEY}"}


async def test_provider_models_are_allowed_and_others_refused(tmp_path: Path) -> None:
    async with fakes() as (local, hosted), \
            Runtime.open(two_providers(tmp_path, local, hosted)) as rt:
        refused = await rt.features.config_command.configure(
            OTHER, parse_config("set model gpt-5"), OPERATOR)
    assert not refused.ok
    assert "allowed models: llama3.1, gpt-4o" in refused.text


async def test_model_params_go_to_every_provider(tmp_path: Path) -> None:
    async with fakes() as (local, hosted), Runtime.open(two_providers(
            tmp_path, local, hosted, MODEL_PARAMS='{"temperature": 0.4, "top_k": 20}')) as rt:
        await rt.features.config_command.configure(OTHER, parse_config("set model gpt-4o"),
                                                   OPERATOR)
        local.push("a")
        hosted.push("b")
        await ask(rt, msg(1, "hi", mention=True))
        await ask(rt, msg(2, "hi", mention=True, key=OTHER))
    for fake in (local, hosted):
        [body] = bodies(fake, summary=False)
        assert (body["temperature"], body["top_k"]) == (0.4, 20)


async def test_a_hung_provider_holds_up_only_its_own_channels(tmp_path: Path) -> None:
    """One slot per endpoint: the local server hangs on a reply, and a channel on the
    hosted provider is still answered meanwhile."""
    async with fakes() as (local, hosted), Runtime.open(two_providers(
            tmp_path, local, hosted, LLM_CONCURRENCY="1")) as rt:
        await rt.features.config_command.configure(OTHER, parse_config("set model gpt-4o"),
                                                   OPERATOR)
        local.push(Hang(600))
        stuck = asyncio.create_task(ask(rt, msg(1, "hi", mention=True)))
        await local.wait_for(lambda f: len(f.chat_requests) == 1)
        hosted.push("still here")
        there = await ask(rt, msg(2, "hi", mention=True, key=OTHER))
        assert there is not None and there.text == "still here"
        assert not stuck.done()
        await local.close()  # the hung request ends; its reply is settled either way
        await stuck


async def test_a_dead_provider_fails_only_its_own_channels(tmp_path: Path) -> None:
    async with fakes() as (local, hosted):
        settings = two_providers(tmp_path, local, hosted)
        await local.close()
        async with Runtime.open(settings) as rt:
            await rt.features.config_command.configure(
                OTHER, parse_config("set model gpt-4o"), OPERATOR)
            hosted.push("fine")
            here = await ask(rt, msg(1, "hi", mention=True))
            there = await ask(rt, msg(2, "hi", mention=True, key=OTHER))
    assert here is not None and here.failed
    assert there is not None and there.text == "fine"


async def test_doctor_checks_each_provider(tmp_path: Path) -> None:
    async with FakeOpenAI(models=("llama3.1",), responder=lambda _: "OK") as local, \
            FakeOpenAI(models=("gpt-4o-mini",), responder=lambda _: "OK") as hosted:
        out = io.StringIO()
        status = await doctor(two_providers(tmp_path, local, hosted), out)
    report = out.getvalue()
    assert status == 1
    assert "llm local  ok:" in report and "using llama3.1" in report
    assert "llm hosted FAILED:" in report and "does not serve PROVIDERS hosted=gpt-4o" in report
    assert HOSTED_KEY not in report


async def test_the_default_endpoint_serves_models_no_provider_lists(tmp_path: Path) -> None:
    async with FakeOpenAI() as default, FakeOpenAI(models=("llama3.1",)) as local:
        settings = load_settings({
            "OPENAI_BASE_URL": default.base_url,
            "OPENAI_API_KEY": "sk-default-8c1d2e3f4a",
            "MODEL_NAME": "gpt-test",
            "PROVIDERS": json.dumps({"local": {"base_url": local.base_url,
                                               "models": ["llama3.1"]}}),
            "DATABASE_URL": f"sqlite:///{tmp_path}/t.db",
            "LLM_MAX_RETRIES": "0",
        })
        async with Runtime.open(settings) as rt:
            await rt.features.config_command.configure(
                OTHER, parse_config("set model llama3.1"), OPERATOR)
            default.push("default")
            local.push("local")
            await ask(rt, msg(1, "hi", mention=True))
            await ask(rt, msg(2, "hi", mention=True, key=OTHER))
    assert [b["model"] for b in bodies(default, summary=False)] == ["gpt-test"]
    assert authorization(default) == {"Bearer sk-default-8c1d2e3f4a"}
    assert [b["model"] for b in bodies(local, summary=False)] == ["llama3.1"]
    assert authorization(local) == {"Bearer no-key-required"}


@pytest.mark.parametrize(("env", "says"), [
    ({"PROVIDERS": "{local: 1}"}, "PROVIDERS: is not JSON"),
    ({"PROVIDERS": '{"local": {"models": ["a"]}}'},
     'PROVIDERS["local"]["base_url"]: Field required'),
    ({"PROVIDERS": '{"local": {"base_url": "localhost:11434", "models": ["a"]}}'},
     "must be an http(s) URL"),
    ({"PROVIDERS": '{"local": {"base_url": "http://h/v1", "models": []}}'},
     'PROVIDERS["local"]["models"]: '),
    ({"PROVIDERS": '{"a": {"base_url": "http://h/v1", "models": ["m"]}, '
                   '"b": {"base_url": "http://i/v1", "models": ["m"]}}'},
     "model 'm' is listed by both 'a' and 'b'"),
    ({"PROVIDERS": '{"h": {"base_url": "http://h/v1", "api_key": "YOUR_API_KEY", '
                   '"models": ["m"]}}'}, "looks like a placeholder"),
    ({"PROVIDERS": '{"local": {"base_url": "http://h/v1", "models": ["llama3.1"]}}',
      "MODEL_NAME": "gpt-4o"}, "MODEL_NAME=gpt-4o is served by no provider"),
])
def test_providers_that_cannot_work_stop_the_start(env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env)
    assert says in str(caught.value)


def test_provider_keys_are_scrubbed_secrets() -> None:
    settings = load_settings({"PROVIDERS": json.dumps({"h": {
        "base_url": "https://user:pw-in-url@h.example/v1", "api_key": HOSTED_KEY,
        "models": ["m"]}}), "MODEL_NAME": "m"})
    secrets: list[Any] = settings.secrets()
    assert HOSTED_KEY in secrets and "pw-in-url" in secrets
