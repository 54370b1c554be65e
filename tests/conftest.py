"""Shared fixtures: a scripted summary model that must be used up, and one tokenizer; and
the suite's rules for processes and time: every child a test starts is reaped
(``tests.harness.children``), and every per-test timeout scales with the machine's load
(``tests.harness.deadlines``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import pytest

from memory.tokens import TokenCounter
from tests.fakes.models import ScriptedModel, Step
from tests.harness import children as _children
from tests.harness.deadlines import FACTOR, scaled

_AT_START = pytest.StashKey[dict[int, float]]()


def pytest_configure(config: pytest.Config) -> None:
    """Adopt orphaned grandchildren, and note the children that are not the tests' (an
    xdist controller's workers start later and are never reaped: see ``_controller``)."""
    _children.become_subreaper()
    config.stash[_AT_START] = _children.children()


def _controller(config: pytest.Config) -> bool:
    """Whether this process only hands tests to xdist workers (its children)."""
    workers = getattr(config.option, "numprocesses", None)
    return not hasattr(config, "workerinput") and workers not in (None, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Scale each test's timeout (its mark's, else the configured one) by the deadline
    factor; a test without any keeps none."""
    configured = config.getvalue("timeout") or config.getini("timeout")
    for item in items:
        mark = item.get_closest_marker("timeout")
        base = (mark.args[0] if mark is not None and mark.args
                else mark.kwargs.get("timeout") if mark is not None else None) or configured
        if base and float(base) > 0 and FACTOR != 1.0:
            kwargs = dict(mark.kwargs) if mark is not None else {}
            kwargs["timeout"] = scaled(float(base))
            item.add_marker(pytest.mark.timeout(**kwargs), append=False)


@pytest.fixture(autouse=True)
def _reap_children() -> Iterator[None]:
    """Kill and wait whatever child process the test left behind, pass or fail; one still
    running is a warning (the test should have ended it)."""
    before = _children.children()
    yield
    for left in _children.reap(before):
        warnings.warn(f"a test left a child process running, killed: {left}", stacklevel=1)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Nothing a test started outlives the session."""
    if not _controller(session.config):
        _children.reap(session.config.stash.get(_AT_START, {}))


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
    monkeypatch.setattr("bot.storage.SqliteStore",
                        functools.partial(SqliteStore, busy_timeout=0.2))


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
