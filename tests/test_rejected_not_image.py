"""A 400 that is not about the image: the endpoint rejects a request field (an operator's
``MODEL_PARAMS`` it does not take), with an image riding along in the channel.

Retrying without the image fails the same way, so the image was not what the endpoint
refused: it must not be marked ``could not be read`` (which would overwrite the model's
stored description and stop it being sent for good, after the operator fixes the field).

The real slack-bolt app over HTTP against the loopback Slack (whose file host serves the
image), the real openai SDK against the loopback OpenAI server, a real SQLite file or the
real PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from bot.attachments.describe import DESCRIBE_PROMPT
from bot.attachments.model import UNREADABLE_IMAGE
from tests.fakes.openai_server import (
    FakeOpenAI,
    Request,
    content_text,
    default_responder,
    image_parts,
    is_summary_request,
)
from tests.harness.hostile import png
from tests.harness.postgres import PG, fresh_schema, reachable
from tests.harness.slack import mention, open_harness

PICTURE = png(8, 8, (10, 200, 10))  # an image the endpoint reads well
FIELD = "Invalid value for 'temperature': must be at most 2."


@pytest.fixture(params=["sqlite", "postgres"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """``DATABASE_URL`` of a fresh SQLite file or PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rejected.db'}"
        return
    if not reachable():
        pytest.skip(f"no PostgreSQL listening for {urlsplit(PG).netloc}")
    async with fresh_schema() as url:
        yield url


def replies(fake: FakeOpenAI) -> list[Request]:
    """The reply requests (not summaries, not image descriptions)."""
    return [r for r in fake.chat_requests if not is_summary_request(r.json or {})
            and DESCRIBE_PROMPT not in content_text(r.json["messages"][0]["content"])]


def too_hot(body: dict[str, Any]) -> str | None:
    """What OpenAI says of a temperature over 2 (the image is not the problem)."""
    temperature = body.get("temperature")
    return FIELD if isinstance(temperature, int | float) and temperature > 2 else None


async def test_a_400_about_a_request_field_leaves_the_channels_image_unmarked(
    tmp_path: Path, database: str
) -> None:
    async with FakeOpenAI(responder=default_responder, models=("gpt-4o",)) as model:
        env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-4o", "VISION": "on",
               "LLM_MAX_RETRIES": "0", "DATABASE_URL": database,
               "MODEL_PARAMS": '{"temperature": 3}'}
        async with open_harness(tmp_path, None, env) as h:
            f = h.fake.file("meadow.png", PICTURE, "image/png")
            shared = mention("a picture of the meadow", ts="1700000001.000100",
                             kind="message", subtype="file_share", files=[f])
            assert await h.event(shared) == 200
            await h.settle()
            await asyncio.wait_for(h.rt.features.attachments.idle(), 20)
            (described,) = [t.text for t in await h.turns()]
            assert "[image: meadow.png, 8×8: " in described  # the model's description

            model.reject = too_hot  # every reply request is refused for its temperature
            ask = mention("<@UBOT> what is in the picture?", ts="1700000002.000100", user="U2")
            assert await h.event(ask, event_id="Ev2") == 200
            await h.settle()
            assert model.rejected and image_parts(model.rejected[0].json)

            stored = next(t.text for t in await h.turns() if t.role == "user")
            assert UNREADABLE_IMAGE not in stored, stored
            assert stored == described  # the description is kept, word for word

            model.reject = None  # the operator fixes the field
            again = mention("<@UBOT> and now?", ts="1700000003.000100", user="U2")
            assert await h.event(again, event_id="Ev3") == 200
            await h.settle()
            assert image_parts(replies(model)[-1].json)  # the image still goes along


async def test_a_400_about_a_request_field_while_describing_leaves_the_image_unmarked(
    tmp_path: Path, database: str
) -> None:
    async with FakeOpenAI(responder=default_responder, models=("gpt-4o",)) as model:
        model.reject = too_hot  # the description's request carries SUMMARY_MODEL_PARAMS
        env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-4o", "VISION": "on",
               "LLM_MAX_RETRIES": "0", "DATABASE_URL": database,
               "SUMMARY_MODEL_PARAMS": '{"temperature": 3}'}
        async with open_harness(tmp_path, None, env) as h:
            f = h.fake.file("meadow.png", PICTURE, "image/png")
            shared = mention("a picture of the meadow", ts="1700000001.000100",
                             kind="message", subtype="file_share", files=[f])
            assert await h.event(shared) == 200
            await h.settle()
            await asyncio.wait_for(h.rt.features.attachments.idle(), 20)
            assert model.rejected and image_parts(model.rejected[0].json)
            (stored,) = [t.text for t in await h.turns()]
            assert stored.endswith("[image: meadow.png, 8×8]"), stored  # as it was

            ask = mention("<@UBOT> what is in the picture?", ts="1700000002.000100", user="U2")
            assert await h.event(ask, event_id="Ev2") == 200
            await h.settle()
            assert image_parts(replies(model)[-1].json)  # the reply still shows it
