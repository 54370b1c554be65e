"""Slack slash commands through the real slack-bolt app over HTTP: ``/summary`` (ephemeral
or public), ``/reset`` for admins, owners and configured ids, ``/remember``, ``/memory`` and
``/forget``.
"""

from __future__ import annotations

import pytest

from tests.harness.slack import (
    KEY,
    Harness,
    mention,
)


async def _two_messages(h: Harness) -> None:
    assert await h.event(mention("order 1234 is late", kind="message")) == 200
    assert (
        await h.event(
            mention("I'll check it", user="U2", kind="message", ts="1700000000.000200"),
            event_id="Ev2",
        )
        == 200
    )
    await h.settle()


async def test_summary_is_ephemeral_by_default(h: Harness) -> None:
    await _two_messages(h)
    status, text = await h.command("/summary")
    assert status == 200 and text == ""
    [call] = await h.fake.wait_for("response_url:summary")
    assert call.params["response_type"] == "ephemeral"
    assert "order 1234" in call.params["text"] and "Remembering 2 messages" in call.params["text"]
    assert h.llm.purposes == ["digest"]
    assert len(await h.turns()) == 2  # /summary stores nothing


async def test_summary_public_posts_to_channel(h: Harness) -> None:
    await _two_messages(h)
    await h.command("/summary", text="public")
    [call] = await h.fake.wait_for("response_url:summary")
    assert call.params["response_type"] == "in_channel"


async def test_summary_of_empty_channel(h: Harness) -> None:
    await h.command("/summary")
    [call] = await h.fake.wait_for("response_url:summary")
    assert "Nothing to summarize yet" in call.params["text"]
    assert h.llm.purposes == []


async def test_reset_refused_for_ordinary_member(h: Harness) -> None:
    await _two_messages(h)
    await h.command("/reset", user="U1")
    [call] = await h.fake.wait_for("response_url:reset")
    assert call.params["response_type"] == "ephemeral"
    assert "Only workspace admins and owners" in call.params["text"]
    await h.settle()
    assert len(await h.turns()) == 2


@pytest.mark.parametrize("user", ["U2", "U3"])
async def test_reset_allowed_for_admin_and_owner(h: Harness, user: str) -> None:
    await _two_messages(h)
    await h.command("/reset", user=user)
    [call] = await h.fake.wait_for("response_url:reset")
    assert call.params["text"] == "Done: I forgot 2 messages from this channel."
    assert await h.turns() == []
    assert [c.params["user"] for c in h.fake.calls_to("users.info")][-1] == user  # asked fresh


async def test_reset_allowed_for_configured_admin_id(h: Harness) -> None:
    await _two_messages(h)
    calls_before = len(h.fake.calls_to("users.info"))
    await h.command("/reset", user="UCONF")
    [call] = await h.fake.wait_for("response_url:reset")
    assert call.params["text"].startswith("Done: I forgot 2 messages")
    assert len(h.fake.calls_to("users.info")) == calls_before
    assert await h.turns() == []


async def test_remember_memory_forget_commands(h: Harness) -> None:
    await h.command("/remember", user="U1", text="the standup moves to 9:30")
    [call] = await h.fake.wait_for("response_url:remember")
    assert call.params["response_type"] == "ephemeral"
    assert call.params["text"].startswith("Remembered as fact #")
    [fact] = await h.rt.memory.facts(KEY)
    assert (fact.text, fact.author, fact.pinned) == ("the standup moves to 9:30", "Alice", True)

    await h.command("/memory", user="U1")
    [listing] = await h.fake.wait_for("response_url:memory")
    assert listing.params["response_type"] == "ephemeral"
    assert f"#{fact.id}" in listing.params["text"] and "standup" in listing.params["text"]

    await h.command("/forget", user="U1", text=str(fact.id))
    [refused] = await h.fake.wait_for("response_url:forget")
    assert refused.params["response_type"] == "ephemeral"
    assert "Only workspace admins and owners" in refused.params["text"]
    await h.settle()
    assert len(await h.rt.memory.facts(KEY)) == 1

    await h.command("/forget", user="U2", text="standup")
    calls = await h.fake.wait_for("response_url:forget", 2)
    assert calls[1].params["text"] == f"Forgot fact #{fact.id}: the standup moves to 9:30"
    assert await h.rt.memory.facts(KEY) == []


async def test_forget_with_a_superscript_or_huge_number_answers_no_such_fact(h: Harness) -> None:
    await h.command("/remember", user="U1", text="the standup moves to 9:30")
    await h.fake.wait_for("response_url:remember")
    await h.command("/forget", user="U2", text="²")
    await h.command("/forget", user="U2", text="99999999999999999999999")
    calls = await h.fake.wait_for("response_url:forget", 2)
    assert sorted(c.params["text"] for c in calls) == [
        "I have no fact matching '99999999999999999999999' here.",
        "I have no fact matching '²' here.",
    ]
    assert len(await h.rt.memory.facts(KEY)) == 1
