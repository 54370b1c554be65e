"""Changes to a message while its files are still being read: an edit is kept (the read's
text joins the edited message, not the words it had when it arrived), and a ``/reset`` of
the channel stays a reset (the read finds no turn to join, and nothing of the file comes
back). The real slack-bolt app over HTTP against the loopback Slack, whose file host holds
the download back, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.harness.postgres import fresh_schema, reachable
from tests.harness.slack import mention, open_harness

NOTES = b"handover for the night shift\ndeploy_token: QX-7741-ZB\n"
TOKEN = "QX-7741-ZB"
TS = "1700000001.000100"


@contextlib.asynccontextmanager
async def database(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    """A ``DATABASE_URL`` of a fresh database of ``backend``."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'gistbot.db'}"
        return
    if not reachable():
        pytest.skip("no PostgreSQL listening")
    async with fresh_schema("gistbot_edit_race") as url:
        yield url


def edit(text: str, before: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    """Slack's ``message_changed`` event for message ``TS`` in C1."""
    return {"type": "message", "subtype": "message_changed", "hidden": True, "channel": "C1",
            "ts": "1700000001.000900",
            "message": {"type": "message", "user": "U1", "text": text, "ts": TS,
                        "files": files},
            "previous_message": {"type": "message", "user": "U1", "text": before, "ts": TS,
                                 "files": files}}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_an_edit_made_while_the_file_is_read_is_kept_with_the_files_text(
    tmp_path: Path, backend: str
) -> None:
    async with (FakeOpenAI(responder=default_responder) as model,
                database(backend, tmp_path) as url):
        env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-test",
               "LLM_MAX_RETRIES": "0", "DATABASE_URL": url}
        async with open_harness(tmp_path, None, env) as h:
            held = asyncio.Event()
            try:
                f = h.fake.file("handover.txt", NOTES, "text/plain", release=held)
                shared = mention("the handover notes", ts=TS, kind="message",
                                 subtype="file_share", files=[f])
                assert await h.event(shared) == 200
                await h.settle()
                changed = edit("the handover notes: rollback moved to Friday",
                               "the handover notes", [f])
                assert await h.event(changed, event_id="Ev2") == 200
                await h.settle()
                (turn,) = await h.turns()
                assert "Friday" in turn.text  # the edit is stored while the file is read
            finally:
                held.set()
            await asyncio.wait_for(h.rt.features.attachments.idle(), 20)
            (turn,) = await h.turns()
            assert TOKEN in turn.text, turn.text  # the file's text joined the message
            assert "rollback moved to Friday" in turn.text, turn.text  # and the edit stayed


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_file_read_after_its_channel_was_reset_does_not_bring_it_back(
    tmp_path: Path, backend: str
) -> None:
    async with (FakeOpenAI(responder=default_responder) as model,
                database(backend, tmp_path) as url):
        env = {"OPENAI_BASE_URL": model.base_url, "MODEL_NAME": "gpt-test",
               "LLM_MAX_RETRIES": "0", "DATABASE_URL": url}
        async with open_harness(tmp_path, None, env) as h:
            held = asyncio.Event()
            try:
                f = h.fake.file("handover.txt", NOTES, "text/plain", release=held)
                shared = mention("the handover notes", ts=TS, kind="message",
                                 subtype="file_share", files=[f])
                assert await h.event(shared) == 200
                await h.settle()
                await h.command("/reset", user="U2")  # a workspace admin
                [call] = await h.fake.wait_for("response_url:reset")
                assert call.params["text"].startswith("Done: I forgot 1 message")
            finally:
                held.set()
            await asyncio.wait_for(h.rt.features.attachments.idle(), 20)
            assert await h.turns() == []  # the late text found nothing to join
            ask = mention("<@UBOT> what is the deploy token?", ts="1700000002.000100",
                          user="U2")
            assert await h.event(ask, event_id="Ev3") == 200
            await h.settle()
            prompt = "\n".join(str(m["content"]) for m in model.chat_requests[-1].json["messages"])
            assert TOKEN not in prompt  # forgotten is forgotten
            assert [t.role for t in await h.turns()] == ["user", "assistant"]
