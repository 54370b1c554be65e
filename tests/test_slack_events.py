"""Slack events through the real slack-bolt app over HTTP (``tests/harness/slack.py``):
signatures, what is recorded and answered, one reply per message across re-deliveries,
mention twins and replicas, edits and deletions.
"""

from __future__ import annotations

import asyncio
import json
import time

from adapters.slack.app import SlackAdapter, build_app
from adapters.slack.transport import serve_http
from bot.app import Runtime
from memory.models import ChannelKey
from tests.harness.slack import (
    KEY,
    PLACEHOLDER,
    TEAM,
    TS,
    FakeLLM,
    Harness,
    event_body,
    make_adapter,
    mention,
    sign,
)

# ---------------------------------------------------------------------- signatures


async def test_good_signature_accepted(h: Harness) -> None:
    body = json.dumps({"token": "x", "challenge": "c-123", "type": "url_verification"})
    status, text = await h.post(body, "application/json", sign(body))
    assert status == 200
    assert "c-123" in text
    assert await h.event(mention("just saying hi", kind="message")) == 200
    await h.settle()
    assert [t.text for t in await h.turns()] == ["just saying hi"]


async def test_bad_signature_rejected(h: Harness) -> None:
    body = json.dumps(event_body(mention()))
    status, _ = await h.post(body, "application/json", sign(body, secret="not-the-secret"))
    assert status == 401
    tampered = sign(body)
    status, _ = await h.post(body.replace("order 1234", "order 9999"), "application/json", tampered)
    assert status == 401
    await h.settle()
    assert await h.turns() == []
    assert h.fake.calls_to("chat.postMessage") == []


async def test_stale_timestamp_rejected(h: Harness) -> None:
    body = json.dumps(event_body(mention()))
    status, _ = await h.post(body, "application/json", sign(body, timestamp=int(time.time()) - 600))
    assert status == 401
    await h.settle()
    assert await h.turns() == []
    assert h.llm.reply_calls == 0


# ---------------------------------------------------------------------- events


async def test_mention_answered_in_its_thread(h: Harness) -> None:
    assert await h.event(mention()) == 200
    update = (await h.fake.wait_for("chat.update"))[0].params
    placeholder = h.fake.calls_to("chat.postMessage")[0].params
    assert placeholder["text"] == PLACEHOLDER
    assert placeholder["channel"] == "C1" and placeholder["thread_ts"] == TS
    assert update["ts"] == "1800000000.000001"  # the placeholder's ts, as the fake issued it
    assert update["text"] == "Hello from the model."
    await h.settle()
    turns = await h.turns()
    assert [(t.role, t.author_name) for t in turns] == [("user", "Alice"), ("assistant", "gistbot")]
    assert turns[0].text == "@gistbot what about order 1234?"
    assert turns[1].author_id == "UBOT"


async def test_thread_reply_goes_to_thread_and_channel_memory(h: Harness) -> None:
    event = mention(ts="1700000000.000200", thread_ts="1700000000.000100", kind="message")
    assert await h.event(event) == 200
    await h.fake.wait_for("chat.update")
    assert h.fake.calls_to("chat.postMessage")[0].params["thread_ts"] == "1700000000.000100"
    await h.settle()
    assert len(await h.turns(KEY)) == 2


async def test_ack_comes_before_the_work(h: Harness, llm: FakeLLM) -> None:
    llm.gate = asyncio.Event()
    async with asyncio.timeout(3):  # Slack's deadline
        assert await h.event(mention()) == 200
    await asyncio.wait_for(llm.entered.wait(), 5)
    assert h.fake.calls_to("chat.update") == []  # still thinking, but Slack has its 200
    llm.gate.set()
    await h.fake.wait_for("chat.update")


async def test_redelivery_and_mention_twin_give_one_turn_one_reply(h: Harness) -> None:
    assert await h.event(mention(), event_id="Ev1") == 200
    assert await h.event(mention(kind="message"), event_id="Ev2") == 200  # the twin
    assert await h.event(mention(), event_id="Ev1", retry=1) == 200
    await h.settle()
    assert await h.event(mention(), event_id="Ev1", retry=2) == 200
    await h.settle()
    assert h.llm.reply_calls == 1
    assert [t.role for t in await h.turns()] == ["user", "assistant"]
    assert len(h.fake.calls_to("chat.postMessage")) == 1
    assert len(h.fake.calls_to("chat.update")) == 1


async def test_second_replica_does_not_answer_again(h: Harness) -> None:
    """Two replicas (HTTP mode behind a load balancer, each with its own store connection to
    the shared database) get the same event: the claim in the database and the idempotent
    record decide; the second replica posts nothing at all."""
    async with Runtime.open(h.rt.settings, llm=h.llm) as other_rt:
        other = make_adapter(other_rt, h.fake.api_url)
        await _second_replica(h, other)


async def _second_replica(h: Harness, other: SlackAdapter) -> None:
    async with serve_http(build_app(other), "127.0.0.1", 0) as url:
        assert await h.event(mention()) == 200
        await h.settle()
        body = json.dumps(event_body(mention()))
        async with h.http.post(
            url, data=body, headers={"Content-Type": "application/json", **sign(body)}
        ) as r:
            assert r.status == 200
        assert await other.drain(within=10)
    await other.close()
    assert h.llm.reply_calls == 1
    assert [t.role for t in await h.turns()] == ["user", "assistant"]
    assert len(h.fake.calls_to("chat.postMessage")) == 1
    assert len(h.fake.calls_to("chat.update")) == 1
    assert h.fake.calls_to("chat.delete") == []


async def test_channel_message_recorded_readable_without_reply(h: Harness) -> None:
    text = "<@U2> please check <https://example.com/x|the doc> &amp; <#C9|random> &lt;3"
    assert await h.event(mention(text, kind="message")) == 200
    await h.settle()
    [turn] = await h.turns()
    assert turn.text == "@Bob please check the doc (https://example.com/x) & #random <3"
    assert (turn.author_id, turn.author_name, turn.message_id) == ("U1", "Alice", TS)
    assert h.fake.calls_to("chat.postMessage") == []
    assert h.llm.reply_calls == 0
    looked_up = sorted(c.params["user"] for c in h.fake.calls_to("users.info"))
    assert looked_up == ["U1", "U2"]
    assert await h.event(mention("again", kind="message", ts="1700000000.000300")) == 200
    await h.settle()
    assert len(h.fake.calls_to("users.info")) == 2  # names are cached


async def test_direct_message_answered(h: Harness) -> None:
    assert await h.event(mention("hello there", kind="message", channel="D1")) == 200
    update = (await h.fake.wait_for("chat.update"))[0].params
    assert update["channel"] == "D1"
    await h.settle()
    assert [t.role for t in await h.turns(ChannelKey("slack", TEAM, "D1"))] == ["user", "assistant"]


async def test_bots_itself_and_non_conversation_subtypes_skipped(h: Harness) -> None:
    skipped = [
        {
            "type": "message",
            "subtype": "bot_message",
            "bot_id": "B9",
            "text": "<@UBOT> hi",
            "ts": "1700000000.000001",
            "channel": "C1",
        },
        {
            "type": "message",
            "user": "U9",
            "bot_id": "B9",
            "text": "<@UBOT> hi",
            "ts": "1700000000.000002",
            "channel": "C1",
        },
        {
            "type": "message",
            "user": "UBOT",
            "text": "my own words",
            "ts": "1700000000.000003",
            "channel": "C1",
        },
        {
            "type": "message",
            "subtype": "channel_join",
            "user": "U1",
            "text": "<@U1> has joined the channel",
            "ts": "1700000000.000004",
            "channel": "C1",
        },
        {
            "type": "message",
            "subtype": "channel_topic",
            "user": "U1",
            "text": "set the topic",
            "ts": "1700000000.000005",
            "channel": "C1",
        },
    ]
    for i, event in enumerate(skipped):
        assert await h.event(event, event_id=f"Ev{i}") == 200
    await h.settle()
    assert await h.turns() == []
    assert h.fake.calls_to("chat.postMessage") == [] and h.llm.reply_calls == 0


async def test_file_share_without_text_is_remembered(h: Harness) -> None:
    event = mention(
        "",
        kind="message",
        subtype="file_share",
        files=[{"id": "F1", "name": "report.pdf", "title": "Q3 report"}],
    )
    assert await h.event(event) == 200
    await h.settle()
    assert [t.text for t in await h.turns()] == ["[file: report.pdf]"]


async def test_edit_and_delete(h: Harness) -> None:
    assert await h.event(mention("order 1234 ships Monday", kind="message")) == 200
    await h.settle()
    edited = {
        "type": "message", "subtype": "message_changed", "hidden": True, "channel": "C1",
        "ts": "1700000000.000900",
        "message": {"type": "message", "user": "U1", "text": "order 1234 ships <@U2> Tuesday",
                    "ts": TS},
        "previous_message": {"type": "message", "user": "U1", "text": "order 1234 ships Monday",
                             "ts": TS},
    }  # fmt: skip
    assert await h.event(edited, event_id="Ev2") == 200
    await h.settle()
    assert [t.text for t in await h.turns()] == ["order 1234 ships @Bob Tuesday"]
    deleted = {
        "type": "message",
        "subtype": "message_deleted",
        "hidden": True,
        "channel": "C1",
        "ts": "1700000000.000901",
        "deleted_ts": TS,
        "previous_message": {"type": "message", "user": "U1", "text": "x", "ts": TS},
    }
    assert await h.event(deleted, event_id="Ev3") == 200
    await h.settle()
    assert await h.turns() == []
