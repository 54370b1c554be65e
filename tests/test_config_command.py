"""``/config`` through the real platform libraries: discord.py against the loopback Discord
(the permission matrix's representative cells — member, channel manager, server manager,
administrator, DM — and autocompletion of keys and allowed models) and slack-bolt over HTTP
(member, admin, SLACK_ADMIN_USER_IDS, DM; the quota notice only the author sees)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.stores.settings import server_scope
from bot.stores.usage import UsageKey
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import GENERAL, W, followup_to, make_settings, running
from tests.harness.slack import KEY, Harness, mention

MANAGE_CHANNELS, MANAGE_GUILD, ADMINISTRATOR = 1 << 4, 1 << 5, 1 << 3


async def discord_config(fake: FakeDiscord, *, permissions: int = 0, channel: int = W.general,
                         invoker: dict[str, Any] = W.alice, **options: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"permissions": permissions} if permissions else {}
    inter = await fake.interaction("config", invoker=invoker, channel_id=channel,
                                   options=options, **kwargs)
    answer = await followup_to(fake, inter)
    assert answer.json["flags"] & 64  # only the caller sees /config
    return answer.json  # type: ignore[no-any-return]


@pytest.mark.parametrize(("permissions", "scope", "allowed"), [
    (0, "channel", False),  # a member
    (MANAGE_CHANNELS, "channel", True),  # a channel manager
    (MANAGE_CHANNELS, "server", False),
    (MANAGE_GUILD, "server", True),  # a server manager
    (MANAGE_GUILD, "channel", False),
    (ADMINISTRATOR, "server", True),  # an administrator may do both
    (ADMINISTRATOR, "channel", True),
])
async def test_discord_config_set_needs_the_scopes_permission(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI, permissions: int,
    scope: str, allowed: bool,
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _):
        answer = await discord_config(discord_fake, permissions=permissions, action="set",
                                      key="reply_mode", value="all", scope=scope)
        stored = await rt.storage.settings.scope_settings(GENERAL)
        if allowed:
            where = "this server" if scope == "server" else "this channel"
            assert answer["content"] == f"Set reply_mode for {where} to all."
            [row] = stored
            assert row.scope == (server_scope(GENERAL) if scope == "server" else GENERAL)
            assert row.updated_by == f"Alice ({W.alice['id']})"
        else:
            need = "Manage Server" if scope == "server" else "Manage Channels"
            assert f"You need the {need} permission" in answer["content"]
            assert stored == []


async def test_discord_config_in_a_dm_shows_but_changes_nothing(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _):
        refused = await discord_config(discord_fake, channel=W.dm_channel, action="set",
                                       key="persona", value="You are a cat.")
        assert "direct message" in refused["content"]
        assert (await rt.storage.settings.all_settings()) == ([], [])
        shown = await discord_config(discord_fake, channel=W.dm_channel)
        assert "persona:" in shown["content"] and "(default)" in shown["content"]


async def test_discord_config_show_and_history_are_for_everyone(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as _:
        await discord_config(discord_fake, permissions=MANAGE_CHANNELS, action="set",
                             key="persona", value="You are a helpful librarian.")
        shown = await discord_config(discord_fake, invoker=W.bob)
        assert "persona: You are a helpful librarian.  (channel)" in shown["content"]
        assert "Allowed models: gpt-test" in shown["content"]
        history = await discord_config(discord_fake, invoker=W.bob, action="history")
        assert f"Alice ({W.alice['id']}) · channel: persona = You are a helpful" in (
            history["content"])


async def autocomplete(fake: FakeDiscord, focused: str, **options: Any) -> list[dict[str, Any]]:
    inter = await fake.autocomplete("config", invoker=W.alice, channel_id=W.general,
                                    options=options, focused=focused)
    path = f"/interactions/{inter['id']}/{inter['token']}/callback"
    [callback] = await fake.wait_for(lambda f: [r for r in f.calls("POST", path)])
    assert callback.json["type"] == 8  # APPLICATION_COMMAND_AUTOCOMPLETE_RESULT
    return callback.json["data"]["choices"]  # type: ignore[no-any-return]


async def test_discord_autocompletes_keys_and_allowed_models(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, discord_llm, ALLOWED_MODELS="gpt-test,gpt-big,llama3")
    async with running(settings):
        keys = await autocomplete(discord_fake, "key", action="set", key="model")
        assert [c["value"] for c in keys] == ["model", "summary_model"]
        models = await autocomplete(discord_fake, "value", action="set", key="model", value="")
        assert [c["value"] for c in models] == ["gpt-test", "gpt-big", "llama3"]
        modes = await autocomplete(discord_fake, "value", action="set", key="record", value="a")
        assert [c["value"] for c in modes] == ["all", "addressed"]


# ------------------------------------------------------------------ Slack

async def slack_config(h: Harness, text: str, *, user: str = "U1",
                       channel: str = "C1") -> str:
    before = len(h.fake.calls_to("response_url:config"))
    status, _ = await h.command("/config", user=user, text=text, channel=channel)
    assert status == 200
    calls = await h.fake.wait_for("response_url:config", count=before + 1)
    assert calls[-1].params["response_type"] == "ephemeral"
    text_out: str = calls[-1].params["text"]
    return text_out


@pytest.mark.parametrize(("user", "allowed"), [
    ("U1", False),  # a member
    ("U2", True),  # an admin
    ("U3", True),  # an owner
    ("UCONF", True),  # listed in SLACK_ADMIN_USER_IDS
])
async def test_slack_config_set_needs_admin_owner_or_the_list(
    h: Harness, user: str, allowed: bool
) -> None:
    h.fake.add_user("UCONF", "Conf")
    answer = await slack_config(h, "set server reply_mode all", user=user)
    stored = await h.rt.storage.settings.scope_settings(KEY)
    if allowed:
        assert answer == "Set reply_mode for this server to all."
        assert [s.scope for s in stored] == [server_scope(KEY)]
    else:
        assert "Only workspace admins and owners" in answer and stored == []


async def test_slack_config_in_a_dm_changes_nothing_and_bad_models_show_the_list(
    h: Harness
) -> None:
    refused = await slack_config(h, "set persona be a cat", user="U2", channel="D123")
    assert "direct message" in refused
    wrong = await slack_config(h, "set model gpt-4-32k", user="U2")
    assert "gpt-4-32k" in wrong and "allowed models:" in wrong
    assert await h.rt.storage.settings.all_settings() == ([], [])


async def test_slack_quota_notice_is_ephemeral_and_the_message_is_remembered(
    tmp_path: Path, discord_llm: FakeOpenAI
) -> None:
    from tests.harness.slack import open_harness

    env = {"DAILY_TOKENS_PER_USER": "100", "OPENAI_BASE_URL": discord_llm.base_url,
           "MODEL_NAME": "gpt-test", "LLM_MAX_RETRIES": "0"}
    async with open_harness(tmp_path, None, env) as h:
        day = h.rt.features.quota.day()
        await h.rt.storage.usage.add_tokens(day, [UsageKey("slack", KEY.workspace, "U1")], 100)
        assert await h.event(mention("<@UBOT> are you there?")) == 200
        await h.settle()
        [notice] = [c.params for c in h.fake.calls_to("chat.postEphemeral")]
        assert notice["user"] == "U1" and "00:00 UTC" in notice["text"]
        assert discord_llm.chat_requests == []  # no model call past the quota
        placeholders = h.fake.calls_to("chat.postMessage")
        assert len(h.fake.calls_to("chat.delete")) == len(placeholders)  # nothing left public
        assert not h.fake.calls_to("chat.update")
        assert [t.text for t in await h.turns()][-1].endswith("are you there?")


async def test_discord_quota_notice_is_a_direct_message(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    from tests.harness.discord import has_turns, mention

    settings = make_settings(tmp_path, discord_llm, DAILY_TOKENS_PER_USER="10")
    async with running(settings) as (rt, _, watch):
        day = rt.features.quota.day()
        alice = UsageKey("discord", str(W.guild_id), W.alice["id"])
        await rt.storage.usage.add_tokens(day, [alice], 10)
        await discord_fake.send_message(W.general, W.alice, mention("are you there?"))
        [notice] = await discord_fake.wait_for(lambda f: f.sent_to(W.dm_channel))
        assert "00:00 UTC" in notice.json["content"]
        await watch.until(lambda: has_turns(rt, 1))  # remembered all the same
        assert discord_fake.sent_to(W.general) == []  # nothing said in the channel
        assert discord_llm.chat_requests == []
