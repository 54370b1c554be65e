"""Who may talk to the bot on Slack, through the real slack-bolt app over HTTP against the
loopback Slack: blocked people, people outside an allow list, blocked channels and direct
messages when DMs are off. Slack has no roles, so a role allow list does not shut Slack out.

An event is acknowledged once the service handled it; ``settle`` waits for any reply it
started, so "no post" below means none was made.
"""

from __future__ import annotations

import pytest

from bot.access import REFUSED
from memory.models import ChannelKey
from tests.harness.slack import KEY, TEAM, Harness, mention, posts


async def _refused_command(h: Harness, user: str, channel: str = "C1") -> None:
    """``/summary`` by ``user`` is answered with the private refusal, not a summary."""
    status, _ = await h.command("/summary", user=user, channel=channel)
    assert status == 200
    [call] = await h.fake.wait_for("response_url:summary")
    assert call.params["text"] == REFUSED
    assert call.params["response_type"] == "ephemeral"
    assert h.llm.purposes == []


@pytest.mark.parametrize("env_extra", [{"BLOCKED_USERS": "U1"}])
async def test_a_blocked_user_gets_no_reply_and_no_command_output_but_is_remembered(
    h: Harness,
) -> None:
    assert await h.event(mention("<@UBOT> what about order 1234?")) == 200
    await h.settle()
    assert posts(h.fake, besides_placeholder=False) == []
    assert h.llm.reply_calls == 0
    assert [t.author_id for t in await h.turns()] == ["U1"]
    await _refused_command(h, "U1")

    assert await h.event(mention("<@UBOT> hi", user="U2", ts="1700000000.000200"),
                         event_id="Ev2") == 200
    await h.settle()
    assert h.llm.reply_calls == 1  # others are answered as before


@pytest.mark.parametrize("env_extra", [{"BLOCKED_USERS": "U1", "RECORD_BLOCKED": "false"}])
async def test_record_blocked_false_keeps_nothing_of_a_blocked_user(h: Harness) -> None:
    assert await h.event(mention("<@UBOT> my card is 4111", kind="message")) == 200
    assert await h.event(mention("lunch?", user="U2", kind="message",
                                 ts="1700000000.000200"), event_id="Ev2") == 200
    await h.settle()
    assert posts(h.fake, besides_placeholder=False) == []
    assert [t.author_id for t in await h.turns()] == ["U2"]


@pytest.mark.parametrize("env_extra", [{"ALLOWED_USERS": "U2", "ALLOWED_ROLES": "210"}])
async def test_a_user_outside_a_non_empty_allow_list_is_ignored(h: Harness) -> None:
    assert await h.event(mention("<@UBOT> may I?")) == 200
    await h.settle()
    assert posts(h.fake, besides_placeholder=False) == []
    await _refused_command(h, "U1")


@pytest.mark.parametrize("env_extra", [{"ALLOWED_ROLES": "210000000000000000"}])
async def test_a_role_allow_list_does_not_apply_on_slack(h: Harness) -> None:
    assert await h.event(mention("<@UBOT> hello")) == 200
    await h.settle()
    assert h.llm.reply_calls == 1


@pytest.mark.parametrize("env_extra", [{"BLOCKED_CHANNELS": "C1"}])
async def test_a_blocked_channel_gets_no_reply_and_nothing_is_stored(h: Harness) -> None:
    assert await h.event(mention("<@UBOT> anyone?", kind="message")) == 200
    await h.settle()
    assert posts(h.fake, besides_placeholder=False) == []
    assert await h.turns(KEY) == []
    await _refused_command(h, "U1")

    assert await h.event(mention("<@UBOT> here?", channel="C2", ts="1700000000.000200"),
                         event_id="Ev2") == 200
    await h.settle()
    assert h.llm.reply_calls == 1


@pytest.mark.parametrize("env_extra", [{"ALLOW_DMS": "false"}])
async def test_a_direct_message_gets_no_reply_when_dms_are_off(h: Harness) -> None:
    assert await h.event(mention("hello there", kind="message", channel="D1")) == 200
    await h.settle()
    assert posts(h.fake, besides_placeholder=False) == []
    assert await h.turns(ChannelKey("slack", TEAM, "D1")) == []
    await _refused_command(h, "U1", channel="D1")


async def test_a_workspace_blocks_a_channel_with_config(h: Harness) -> None:
    await h.command("/config", user="U2", text="set server blocked_channels C1")
    [call] = await h.fake.wait_for("response_url:config")
    assert call.params["text"] == "Set blocked_channels for this server to C1."
    assert await h.event(mention("<@UBOT> anyone?", kind="message")) == 200
    await h.settle()
    assert posts(h.fake, besides_placeholder=False) == []
    assert await h.turns(KEY) == []
