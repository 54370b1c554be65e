"""The Discord adapter's pure parts, without a network: the invite URL, the options, the
text helpers, and ``to_incoming`` on real discord.py objects built from gateway payloads.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from adapters.discord import invite_url
from adapters.discord.options import checked, guild_ids, token
from adapters.discord.text import plan_reply, preview, render_mentions, to_incoming
from bot.errors import ConfigError
from bot.settings import load_settings
from memory.models import ChannelKey
from tests.fakes.discord_server import message, user
from tests.harness.discord import (
    Objects,
    W,
    fence_lines,
)


def test_invite_url_has_exact_scopes_and_permissions() -> None:
    url = invite_url(1234)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "discord.com", "/oauth2/authorize")
    query = parse_qs(parts.query)
    assert query["client_id"] == ["1234"]
    assert query["scope"] == ["bot applications.commands"]
    view, send, attach, history, threads = 1 << 10, 1 << 11, 1 << 15, 1 << 16, 1 << 38
    assert query["permissions"] == [str(view | send | attach | history | threads)]


def test_render_mentions() -> None:
    text = "<@1> and <@!2> in <#3> ping <@&4>, <@9> <#9> <@&9> <:party:77> <a:wave:78>"
    out = render_mentions(
        text, users={1: "Alice", 2: "Bob"}, roles={4: "Mods"}, channels={3: "general"}
    )
    assert out == (
        "@Alice and @Bob in #general ping @Mods, @unknown-user #unknown-channel "
        "@unknown-role :party: :wave:"
    )


def test_plan_reply_overflows_into_a_file() -> None:
    text = "\n\n".join(f"paragraph {i} " + "word " * 300 for i in range(8))  # ~12,000 chars
    plan = plan_reply(text)
    assert len(plan.messages) == 4 and all(len(m) <= 2000 for m in plan.messages)
    assert plan.attachment is not None and plan.attachment.strip()
    assert re.sub(r"\s", "", "".join(plan.messages) + plan.attachment) == re.sub(r"\s", "", text)
    assert plan_reply("short").messages == ["short"] and plan_reply("short").attachment is None


def test_preview_is_one_message_marked_unfinished() -> None:
    assert preview("abc") == "abc"
    long = preview("```py\n" + "x = 1\n" * 500)
    assert len(long) <= 2000 and long.endswith("``` …") and fence_lines(long) == 2


def test_options_are_checked() -> None:
    base = {"DISCORD_TOKEN": "t"}
    with pytest.raises(ConfigError, match="DISCORD_TOKEN"):
        checked(load_settings({}, env_file=None))
    with pytest.raises(ConfigError, match="DISCORD_GUILD_IDS"):
        checked(load_settings(base | {"DISCORD_GUILD_IDS": "abc"}))
    with pytest.raises(ConfigError, match="DISCORD_RESET_PERMISSION"):
        checked(load_settings(base | {"DISCORD_RESET_PERMISSION": "boss"}))
    settings = checked(
        load_settings(base | {"DISCORD_GUILD_IDS": "1, 2", "STREAM_REPLIES": "true"})
    )
    assert guild_ids(settings.discord) == (1, 2) and settings.chat.stream_replies
    assert token(settings.discord) == "t"


def test_to_incoming_renders_mentions_and_notes_attachments(objects: Objects) -> None:
    msg = objects.message(
        W.general,
        W.alice,
        f"<@{W.bot_id}> ask <@!{W.bob['id']}> in <#{W.thread}> and <#{W.readonly}>, "
        f"cc <@&{W.mod_role}>",
        mentions=[W.bot_user, W.bob],
        mention_roles=[W.mod_role],
        attachments=["plan.pdf", "photo.png"],
    )
    incoming = to_incoming(msg, W.bot_id)
    assert incoming is not None
    assert incoming.text == (
        "@gistbot ask @Bob in #design-thread and #announcements, cc "
        "@Moderators\n[attachment: plan.pdf]\n[attachment: photo.png]"
    )
    assert incoming.key == ChannelKey("discord", str(W.guild_id), str(W.general))
    assert (incoming.author_id, incoming.author_name) == (W.alice["id"], "Alice")
    assert incoming.message_id == str(msg.id)
    assert incoming.mentions_bot and not incoming.is_direct and not incoming.reply_to_bot
    assert abs(incoming.sent_at - msg.created_at.timestamp()) < 1e-6


def test_to_incoming_attachment_only_and_empty(objects: Objects) -> None:
    only = to_incoming(objects.message(W.general, W.alice, "", attachments=["a.txt"]), W.bot_id)
    assert only is not None and only.text == "[attachment: a.txt]" and not only.mentions_bot
    assert to_incoming(objects.message(W.general, W.alice, "   "), W.bot_id) is None


def test_to_incoming_dm_thread_and_reply_to_bot(objects: Objects) -> None:
    dm = to_incoming(objects.message(W.dm_channel, W.alice, "hi"), W.bot_id)
    assert dm is not None and dm.is_direct
    assert dm.key == ChannelKey("discord", "dm", str(W.dm_channel))
    thread = to_incoming(objects.message(W.thread, W.bob, "in a thread"), W.bot_id)
    assert thread is not None and not thread.is_direct
    assert thread.key == ChannelKey("discord", str(W.guild_id), str(W.thread))
    bot_said = message(W, W.general, W.bot_user, "an answer")
    reply = to_incoming(objects.message(W.general, W.alice, "thanks!", reply_to=bot_said), W.bot_id)
    assert reply is not None and reply.reply_to_bot and not reply.mentions_bot
    human_said = message(W, W.general, W.bob, "hello")
    other = to_incoming(
        objects.message(W.general, W.alice, "hi bob", reply_to=human_said), W.bot_id
    )
    assert other is not None and not other.reply_to_bot


def test_to_incoming_bot_role_mention_counts(objects: Objects) -> None:
    msg = objects.message(W.general, W.alice, f"<@&{W.bot_role}> hello", mention_roles=[W.bot_role])
    incoming = to_incoming(msg, W.bot_id)
    assert incoming is not None and incoming.mentions_bot and incoming.text == "@gistbot hello"


def test_to_incoming_ignores_bots_webhooks_itself_and_system_messages(objects: Objects) -> None:
    webhook_user = user(500_000_000_000_000_005, "Captain Hook")
    assert to_incoming(objects.message(W.general, W.other_bot, "beep"), W.bot_id) is None
    assert to_incoming(objects.message(W.general, W.bot_user, "me"), W.bot_id) is None
    hooked = objects.message(W.general, webhook_user, "hook", webhook_id=77)
    assert to_incoming(hooked, W.bot_id) is None
    assert to_incoming(objects.message(W.general, W.alice, "pinned", msg_type=6), W.bot_id) is None
    assert to_incoming(objects.message(W.general, W.alice, "normal"), W.bot_id) is not None
