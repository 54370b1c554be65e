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
