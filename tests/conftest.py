"""Shared fixtures: a scripted summary model that must be used up, and one tokenizer."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from memory.tokens import TokenCounter
from tests.fakes.models import ScriptedModel, Step


@pytest.fixture(scope="session")
def tok() -> TokenCounter:
    """The gpt-4o counter (offline); loading it once per session keeps tests fast."""
    return TokenCounter("gpt-4o")


@pytest.fixture
def scripted() -> Iterator[Callable[..., ScriptedModel]]:
    """Make scripted models; at teardown every scripted step must have been requested."""
    models: list[ScriptedModel] = []

    def make(*steps: Step) -> ScriptedModel:
        models.append(ScriptedModel(*steps))
        return models[-1]

    yield make
    for model in models:
        model.assert_done()


# ---------------------------------------------------------------- shared by several modules
# (the platform harnesses are in tests/harness/; these fixtures only open and close them)

import functools  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from pathlib import Path  # noqa: E402

from memory.stores.sqlite.store import SqliteStore  # noqa: E402
from tests.fakes.discord_server import FakeDiscord  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, default_responder  # noqa: E402
from tests.harness.discord import Objects, loopback_discord  # noqa: E402
from tests.harness.slack import FakeLLM, Harness, open_harness  # noqa: E402


@pytest.fixture
def quick_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runtimes built in the test wait 0.2 s (not 5 s) for a locked database."""
    monkeypatch.setattr("bot.app.SqliteStore", functools.partial(SqliteStore, busy_timeout=0.2))


@pytest.fixture
async def discord_fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """The loopback Discord, with discord.py pointed at it (tests only)."""
    async with loopback_discord(monkeypatch) as fake:
        yield fake


@pytest.fixture
async def discord_llm() -> AsyncIterator[FakeOpenAI]:
    """The loopback OpenAI endpoint of the Discord tests; unscripted requests get the
    deterministic default."""
    async with FakeOpenAI(responder=default_responder) as fake:
        yield fake


@pytest.fixture
def objects() -> Objects:
    """Real discord.py objects from gateway payloads."""
    return Objects()


@pytest.fixture
def llm() -> FakeLLM:
    """The Slack tests' in-process language model (a module may define its own ``llm``)."""
    return FakeLLM()


@pytest.fixture
def env_extra() -> dict[str, str]:
    """Settings added to the Slack harness's environment (override with parametrize)."""
    return {}


@pytest.fixture
async def h(tmp_path: Path, llm: FakeLLM, env_extra: dict[str, str]) -> AsyncIterator[Harness]:
    """The Slack harness: fake Slack, runtime, adapter served over HTTP."""
    async with open_harness(tmp_path, llm, env_extra) as harness:
        yield harness
