"""Isolation and permissions: nothing from one channel, guild, workspace, platform or DM
appears in another's prompt, ``/summary`` or export, and the ``/reset`` permission matrix on
both platforms, including a person who loses the right between two calls.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli import _export
from memory.models import ChannelKey
from tests.fakes.discord_server import MANAGE_MESSAGES, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.fakes.slack_api import api_error
from tests.harness.chat import ask
from tests.harness.discord import (
    W,
    followup_to,
    has_turns,
    make_settings,
    running,
    turns,
)
from tests.harness.service import bodies, msg, runtime
from tests.harness.slack import (
    Harness,
)

ADMINISTRATOR = 1 << 3

# Same channel ids under different guilds, workspaces and platforms, and DMs of two pairs.
KEYS = {
    "guild-a": ChannelKey("discord", "111", "500"),
    "guild-b": ChannelKey("discord", "222", "500"),
    "dm-alice": ChannelKey("discord", "dm", "901"),
    "dm-bob": ChannelKey("discord", "dm", "902"),
    "team-1": ChannelKey("slack", "T1", "C500"),
    "team-2": ChannelKey("slack", "T2", "C500"),
    "slack-dm": ChannelKey("slack", "T1", "D77"),
    "same-ids-other-platform": ChannelKey("slack", "111", "500"),
}
SECRET = {name: f"codeword-{i:02d}-{name}" for i, name in enumerate(KEYS)}


def others(name: str) -> list[str]:
    return [s for n, s in SECRET.items() if n != name]


async def test_nothing_crosses_channels_guilds_workspaces_platforms_or_dms(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, runtime(
        tmp_path, fake, MAX_HISTORY_MESSAGES="4", KEEP_RECENT_MESSAGES="1"
    ) as rt:
        for name, key in KEYS.items():  # enough per channel to be summarized, then a fresh one
            for i in range(7):
                await ask(
                    rt, msg(i, f"note {i}: remember {SECRET[name]} for ticket T-{i}", key=key))
        await rt.memory.wait_idle()
        for name, key in KEYS.items():
            state = await rt.store.state(key)
            assert SECRET[name] in state.text and state.folded_through > 0  # summarized
            fake.push("ok")
            reply = await ask(rt, msg(99, "what do we know?", key=key, mention=True))
            assert reply is not None and not reply.failed
            prompt = json.dumps(bodies(fake, summary=False)[-1], ensure_ascii=False)
            assert SECRET[name] in prompt
            assert not [s for s in others(name) if s in prompt], name
            shown = (await rt.features.memory_commands.summary(key)).text
            digest = json.dumps(bodies(fake, summary=True)[-1], ensure_ascii=False)
            assert SECRET[name] in shown + digest
            assert not [s for s in others(name) if s in shown + digest], name
        settings = rt.settings
    for name, key in KEYS.items():
        out = io.StringIO()
        assert await _export(settings, key, out) == 9  # 7 notes, the question, the answer
        exported = out.getvalue()
        assert SECRET[name] in exported
        assert not [s for s in others(name) if s in exported], name
        header = json.loads(exported.splitlines()[0])
        assert (header["platform"], header["workspace"], header["channel"]) == (
            key.platform, key.workspace, key.channel)


# ---------------------------------------------------------------------- Discord /reset


async def _reset(fake: FakeDiscord, invoker: dict[str, Any], permissions: int,
                 channel: int = W.general) -> str:
    inter = await fake.interaction("reset", invoker=invoker, channel_id=channel,
                                   permissions=permissions)
    answer = await followup_to(fake, inter)
    assert answer.json["flags"] & 64  # only the caller sees it
    return str(answer.json["content"])


MATRIX = [  # (DISCORD_RESET_PERMISSION, permissions of the caller, allowed)
    ("manage_messages", 0, False),
    ("manage_messages", MANAGE_MESSAGES, True),
    ("manage_messages", ADMINISTRATOR, True),
    ("administrator", MANAGE_MESSAGES, False),
    ("administrator", ADMINISTRATOR, True),
    ("manage_channels", 1 << 4, True),
]


@pytest.mark.parametrize(("needed", "perms", "allowed"), MATRIX)
async def test_discord_reset_permission_matrix(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI,
    needed: str, perms: int, allowed: bool,
) -> None:
    settings = make_settings(tmp_path, discord_llm, DISCORD_RESET_PERMISSION=needed)
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "keep me")
        await watch.until(lambda: has_turns(rt, 1))
        text = await _reset(discord_fake, W.bob, perms)
        if allowed:
            assert text == "Done: I forgot 1 message from this channel."
            assert await turns(rt) == []
        else:
            assert f"You need the {needed.replace('_', ' ').title()} permission" in text
            assert len(await turns(rt)) == 1


async def test_discord_reset_in_a_dm_is_the_pairs_own_and_a_lost_role_is_refused(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI,
) -> None:
    dm = ChannelKey("discord", "dm", str(W.dm_channel))
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "guild words")
        await discord_fake.send_message(W.dm_channel, W.alice, "private words")
        await watch.until(lambda: has_turns(rt, 1))
        await discord_fake.wait_for(lambda f: f.sent_to(W.dm_channel))  # the DM is answered
        await watch.until(lambda: has_turns(rt, 2, dm))
        # In a DM the person resets their own conversation; the guild is untouched.
        text = await _reset(discord_fake, W.alice, 0, channel=W.dm_channel)
        assert text == "Done: I forgot 2 messages from this channel."
        assert await turns(rt, dm) == [] and len(await turns(rt)) == 1

        assert (await _reset(discord_fake, W.bob, MANAGE_MESSAGES)).startswith("Done")
        await discord_fake.send_message(W.general, W.alice, "said after the reset")
        await watch.until(lambda: has_turns(rt, 1))
        # Bob's moderator role is taken away: Discord now sends his reduced permissions.
        refused = await _reset(discord_fake, W.bob, 0)
        assert "You need the Manage Messages permission" in refused
        assert [t for _, _, t in await turns(rt)] == ["said after the reset"]


# ---------------------------------------------------------------------- Slack /reset


async def _slack_reset(h: Harness, user: str) -> str:
    before = len(h.fake.calls_to("response_url:reset"))
    status, _ = await h.command("/reset", user=user)
    assert status == 200
    calls = await h.fake.wait_for("response_url:reset", before + 1)
    assert calls[-1].params["response_type"] == "ephemeral"
    return str(calls[-1].params["text"])


async def _note(h: Harness, ts: str) -> None:
    assert await h.event({"type": "message", "user": "U1", "text": "remember this", "ts": ts,
                          "channel": "C1", "channel_type": "channel"}, event_id=f"E{ts}") == 200
    await h.settle()


@pytest.mark.parametrize(("user", "allowed"), [
    ("U1", False),  # a member
    ("U2", True),  # an admin
    ("U3", True),  # an owner
    ("UCONF", True),  # listed in SLACK_ADMIN_USER_IDS
    ("U404", False),  # unknown to users.info
])
async def test_slack_reset_permission_matrix(h: Harness, user: str, allowed: bool) -> None:
    await _note(h, "1700000000.000100")
    text = await _slack_reset(h, user)
    if allowed:
        assert text == "Done: I forgot 1 message from this channel."
        assert await h.turns() == []
    else:
        assert text.startswith("Only workspace admins and owners")
        assert len(await h.turns()) == 1


async def test_slack_reset_fails_closed_when_users_info_fails(h: Harness) -> None:
    await _note(h, "1700000000.000100")
    h.fake.script("users.info", api_error("invalid_auth"))
    assert (await _slack_reset(h, "U2")).startswith("Only workspace admins and owners")
    assert len(await h.turns()) == 1


async def test_slack_admin_who_loses_the_flag_is_refused_at_once(h: Harness) -> None:
    await _note(h, "1700000000.000100")
    assert (await _slack_reset(h, "U2")).startswith("Done")
    await _note(h, "1700000000.000200")
    h.fake.users["U2"]["is_admin"] = False  # demoted in the workspace admin page
    assert (await _slack_reset(h, "U2")).startswith("Only workspace admins and owners")
    assert [t.text for t in await h.turns()] == ["remember this"]
    h.fake.users["U2"]["is_admin"] = True  # and promoted again
    assert (await _slack_reset(h, "U2")).startswith("Done")
    assert await h.turns() == []
