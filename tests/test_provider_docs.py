"""Every ``.env`` example of ``docs/providers.md``, read from the file itself, works: pointed
at the loopback OpenAI fake standing in for that server (its documented URL swapped for the
fake's), a reply goes through the real SDK, and the request carries the documented model,
key and parameters; ``gistbot doctor``'s probe of the endpoint passes."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from dotenv import dotenv_values

from bot.app import Runtime
from bot.channels.config_command import Caller, parse_config
from bot.settings import load_settings
from memory.models import ChannelKey
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.chat import ask
from tests.harness.service import bodies, msg

DOC = Path(__file__).resolve().parents[1] / "docs" / "providers.md"
NO_KEY = "no-key-required"  # what the SDK is given when the server needs no key
# The server each heading is about, and where it listens by default.
SERVERS = {"Ollama": 11434, "LM Studio": 1234, "vLLM": 8000, "llama.cpp": 8080}


def example(heading: str) -> dict[str, str]:
    """The variables of the first ``dotenv`` block under ``heading`` in docs/providers.md."""
    text = DOC.read_text(encoding="utf-8")
    start = re.search(rf"^#+ {re.escape(heading)}\s*$", text, re.MULTILINE)
    assert start is not None, f"docs/providers.md has no heading {heading!r}"
    block = re.search(r"```dotenv\n(.*?)```", text[start.end():], re.DOTALL)
    assert block is not None, f"no dotenv block under {heading!r}"
    values = dotenv_values(stream=io.StringIO(block.group(1)))
    return {k: v for k, v in values.items() if v is not None}


def test_every_local_server_has_an_example() -> None:
    for heading, port in SERVERS.items():
        assert example(heading)["OPENAI_BASE_URL"] == f"http://localhost:{port}/v1"


@pytest.mark.parametrize("heading", list(SERVERS))
async def test_a_local_server_example_answers_with_its_documented_params(
    tmp_path: Path, heading: str
) -> None:
    documented = example(heading)
    model = documented["MODEL_NAME"]
    params: dict[str, Any] = json.loads(documented["MODEL_PARAMS"])
    async with FakeOpenAI(models=(model,), responder=lambda _: "OK") as fake:
        env = {**documented, "OPENAI_BASE_URL": fake.base_url,
               "DATABASE_URL": f"sqlite:///{tmp_path}/t.db", "LLM_MAX_RETRIES": "0"}
        async with Runtime.open(load_settings(env)) as rt:
            probed = await rt.llm.probe()  # type: ignore[attr-defined]
            reply = await ask(rt, msg(1, "hello there", mention=True))
    assert reply is not None and reply.text == "OK" and f"using {model}" in probed
    body = bodies(fake, summary=False)[-1]
    assert body["model"] == model
    assert {k: body.get(k) for k in params} == params
    key = documented.get("OPENAI_API_KEY", NO_KEY)
    assert fake.chat_requests[-1].headers["Authorization"] == f"Bearer {key}"


async def test_the_several_providers_example_sends_a_channel_to_the_local_server(
    tmp_path: Path,
) -> None:
    """The example's default endpoint is api.openai.com; here a second fake stands in for it
    (OPENAI_BASE_URL added) and a key replaces the documented placeholder."""
    documented = example("Several providers")
    providers = json.loads(documented["PROVIDERS"])
    [(name, local_spec)] = providers.items()
    [local_model] = local_spec["models"]
    key = "sk-proj-4b7e1d9a0c"
    async with FakeOpenAI(models=(documented["MODEL_NAME"],)) as hosted, \
            FakeOpenAI(models=(local_model,)) as local:
        providers[name]["base_url"] = local.base_url
        env = {**documented, "OPENAI_API_KEY": key, "OPENAI_BASE_URL": hosted.base_url,
               "PROVIDERS": json.dumps(providers),
               "DATABASE_URL": f"sqlite:///{tmp_path}/t.db", "LLM_MAX_RETRIES": "0"}
        async with Runtime.open(load_settings(env)) as rt:
            other = ChannelKey("test", "w1", "c2")
            answer = await rt.features.config_command.configure(
                other, parse_config(f"set model {local_model}"), Caller("u", "U", may_channel=True))
            assert answer.ok, answer.text
            hosted.push("hosted")
            local.push("local")
            replies = [await ask(rt, msg(1, "hi", mention=True)),
                       await ask(rt, msg(2, "hi", mention=True, key=other))]
    assert [r.text if r else None for r in replies] == ["hosted", "local"]
    assert documented["OPENAI_API_KEY"] == "sk-…"  # the placeholder a reader replaces
    assert hosted.chat_requests[-1].headers["Authorization"] == f"Bearer {key}"
    assert local.chat_requests[-1].headers["Authorization"] == f"Bearer {NO_KEY}"
    assert bodies(local, summary=False)[-1]["model"] == local_model
