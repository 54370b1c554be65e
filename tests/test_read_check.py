"""The one read check, from outside: every command whose answer shows what gistbot stored of
a channel refuses a caller who may not read that channel's history — on Discord a member who
can view #lobby but whose role is denied Read Message History there (her permissions
resolved from roles and overwrites, as Discord and discord.py's ``permissions_for`` do), on
Slack someone who is not a member of the conversation — and an answer posted for everyone
is refused where not everyone who can see it may read the history. Real discord.py and
slack-bolt against the loopback fakes.

``ROWS`` holds one row per command that shows stored content; a new such command joins by
adding its row (``test_every_command_that_shows_stored_content_has_a_row`` makes it).
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import discord
import pytest

from adapters.discord.text import channel_key
from bot.app import Runtime
from bot.features.registry import COMMANDS
from bot.read_check import CANNOT_READ, NOT_FOR_EVERYONE
from bot.stores.digests import DigestSchedule
from tests.fakes.discord_server import (
    EVERYONE_PERMISSIONS,
    MANAGE_MESSAGES,
    READ_MESSAGE_HISTORY,
    SEND_MESSAGES,
    VIEW_CHANNEL,
    FakeDiscord,
    resolve_permissions,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import api_error
from tests.harness.discord import W, Watch, followup_to, has_turns, make_settings, running
from tests.harness.slack import KEY, Harness, mention

LOBBY = channel_key(W.guild_id, W.lobby)
SECRET = "the vault code is VC-7731"
FACT = "vault VC-7731 opens on Fridays"
ASKED = VIEW_CHANNEL | SEND_MESSAGES | READ_MESSAGE_HISTORY | MANAGE_MESSAGES


@dataclass(frozen=True)
class Row:
    """One command that shows stored content: its Discord options and its Slack text."""

    options: dict[str, Any]
    text: str = ""


ROWS = {
    "summary": Row({}),
    "memory": Row({}),
    "forget": Row({"fact": "vault"}, "vault"),
    "catchup": Row({"since": "1h"}, "1h"),
    "digest": Row({}),
}
# Commands whose answers show nothing stored of the channel, and why.
SHOW_NOTHING = {
    "reset": "says how much it forgot, never what",
    "remember": "repeats the caller's own words",
    "config": "the channel's settings, not its conversation",
    "help": "the command list",
    "aboutme": "the caller's own notes, never the channel's conversation",
}


def test_every_command_that_shows_stored_content_has_a_row() -> None:
    shows = {c.name for c in COMMANDS if c.shows}
    assert shows == set(ROWS)
    assert {c.name for c in COMMANDS} == shows | set(SHOW_NOTHING)


def test_every_platform_runs_commands_through_the_read_check() -> None:
    """No adapter calls a command's ``run`` with its context: ``Command.respond`` is the
    door, so the read check cannot be stepped around."""
    root = Path(__file__).resolve().parent.parent
    bypasses = []
    for path in sorted((root / "adapters").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "run" and node.args
                    and _is_context(node.args[0])):
                bypasses.append(f"{path.relative_to(root)}:{node.lineno}")
    assert bypasses == []
    assert sum("respond(" in p.read_text() for p in (root / "adapters").rglob("*.py")) == 3


def _is_context(arg: ast.expr) -> bool:
    """A command context: ``ctx`` or ``SomethingContext(…)``."""
    if isinstance(arg, ast.Name):
        return arg.id == "ctx"
    return (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name)
            and arg.func.id.endswith("Context"))


def test_the_fake_resolves_permissions_as_discord_py_does() -> None:
    client = discord.Client(intents=discord.Intents.default())
    state = client._connection
    guild = discord.Guild(data=W.guild_create(), state=state)  # type: ignore[arg-type]
    lobby = guild.get_channel(W.lobby)
    assert isinstance(lobby, discord.TextChannel)
    for u in (W.alice, W.bob, W.carol):
        member = discord.Member(data=W.member_of(u), guild=guild, state=state)  # type: ignore[arg-type]
        for channel in (lobby, guild.get_channel(W.general), guild.get_channel(W.readonly)):
            assert isinstance(channel, discord.TextChannel)
            resolved = channel.permissions_for(member).value & ASKED
            assert resolve_permissions(W, channel.id, u) & ASKED == resolved, (u, channel)
    carol = resolve_permissions(W, W.lobby, W.carol)
    assert carol & VIEW_CHANNEL and not carol & READ_MESSAGE_HISTORY


async def _lobby(fake: FakeDiscord, rt: Runtime, watch: Watch) -> None:
    """#lobby holds a message and a fact."""
    await fake.send_message(W.lobby, W.bob, SECRET)
    await watch.until(lambda: has_turns(rt, 1, LOBBY))
    await rt.features.memory_commands.remember(LOBBY, FACT, author="Bob")


async def _answer(fake: FakeDiscord, name: str, invoker: dict[str, Any],
                  options: dict[str, Any], channel: int = W.lobby) -> str:
    inter = await fake.interaction(name, invoker=invoker, channel_id=channel,
                                   permissions=None, options=options)
    return str((await followup_to(fake, inter)).json["content"])


@pytest.mark.parametrize("name", sorted(ROWS))
async def test_discord_refuses_a_member_who_cannot_read_the_history(
    name: str, tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await _lobby(discord_fake, rt, watch)
        asked = len(discord_llm.chat_requests)
        answer = await _answer(discord_fake, name, W.carol, ROWS[name].options)
        assert answer == CANNOT_READ
        assert len(discord_llm.chat_requests) == asked  # nothing was even read for her


async def test_discord_shows_a_member_who_can_read_the_history(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.bob, SECRET)
        await watch.until(lambda: has_turns(rt, 1))
        assert "VC-7731" in await _answer(discord_fake, "summary", W.carol, {}, W.general)
        await _lobby(discord_fake, rt, watch)
        assert "VC-7731" in await _answer(discord_fake, "memory", W.bob, {})


@pytest.mark.parametrize("name, options", [("summary", {"public": True}),
                                           ("catchup", {"since": "1h", "public": True}),
                                           ("digest", {"schedule": "now"})])
async def test_discord_posts_no_history_for_everyone_where_some_cannot_read_it(
    name: str, options: dict[str, Any], tmp_path: Path, discord_fake: FakeDiscord,
    discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await _lobby(discord_fake, rt, watch)
        answer = await _answer(discord_fake, name, W.alice, options)  # the owner may read
        assert answer == NOT_FOR_EVERYONE
        assert all("VC-7731" not in str(r.json) for r in discord_fake.sent_to(W.lobby))


async def test_a_scheduled_digest_is_not_posted_where_some_cannot_read_the_history(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await _lobby(discord_fake, rt, watch)
        now = time.time()
        minute = int((now % 86400) // 60 + 2) % 1440
        await rt.storage.digests.set_digest_schedule(
            DigestSchedule(LOBBY, "daily", -1, minute, "UTC", now - 86400 * 2))
        digests = rt.features.catchup_commands.digests
        assert digests is not None
        digests.clock = lambda: now + 181
        asked = len(discord_llm.chat_requests)
        assert await digests.tick() == 0
        assert discord_fake.sent_to(W.lobby) == []
        assert len(discord_llm.chat_requests) == asked


async def test_discord_forget_asks_the_read_check_before_the_permission(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await _lobby(discord_fake, rt, watch)
        inter = await discord_fake.interaction(  # Manage Messages, but not the history
            "forget", invoker=W.bob, channel_id=W.lobby, options={"fact": "vault"},
            permissions=(EVERYONE_PERMISSIONS | MANAGE_MESSAGES) & ~READ_MESSAGE_HISTORY)
        answer = str((await followup_to(discord_fake, inter)).json["content"])
        assert answer == CANNOT_READ
        assert [f.text for f in await rt.store.list_facts(LOBBY)] == [FACT]


async def _slack_channel(h: Harness) -> None:
    """C1 holds a message and a fact; U1 is not one of its members."""
    assert await h.event(mention(SECRET, user="U2", kind="message")) == 200
    await h.settle()
    await h.rt.features.memory_commands.remember(KEY, FACT, author="Bob")
    h.fake.members["C1"] = ["U2", "U3", "UBOT"]


@pytest.mark.parametrize("name", sorted(ROWS))
async def test_slack_refuses_someone_who_is_not_a_member(name: str, h: Harness) -> None:
    await _slack_channel(h)
    purposes = list(h.llm.purposes)
    await h.command(f"/{name}", user="U1", text=ROWS[name].text)
    [call] = await h.fake.wait_for(f"response_url:{name}")
    assert call.params["text"] == CANNOT_READ
    assert call.params["response_type"] == "ephemeral"
    assert h.llm.purposes == purposes
    assert len(h.fake.calls_to("conversations.members")) == 1  # asked once per command


async def test_slack_shows_a_member_and_asks_slack_each_time(h: Harness) -> None:
    await _slack_channel(h)
    await h.command("/memory", user="U2")
    [call] = await h.fake.wait_for("response_url:memory")
    assert "VC-7731" in call.params["text"]
    h.fake.members["C1"] = ["U3", "UBOT"]  # U2 left the channel
    await h.command("/memory", user="U2")
    calls = await h.fake.wait_for("response_url:memory", 2)
    assert calls[1].params["text"] == CANNOT_READ
    assert [c.params["channel"] for c in h.fake.calls_to("conversations.members")] == ["C1"] * 2


async def test_slack_membership_slack_cannot_confirm_counts_as_none(h: Harness) -> None:
    await _slack_channel(h)
    h.fake.members.pop("C1")
    h.fake.script("conversations.members", api_error("ratelimited"))
    await h.command("/summary", user="U2")
    [call] = await h.fake.wait_for("response_url:summary")
    assert call.params["text"] == CANNOT_READ


async def test_slack_finds_a_member_on_a_later_page(h: Harness) -> None:
    await _slack_channel(h)
    h.fake.members["C1"] = [f"UX{i:04d}" for i in range(450)] + ["U1"]
    await h.command("/memory", user="U1")
    [call] = await h.fake.wait_for("response_url:memory")
    assert "VC-7731" in call.params["text"]
    pages = h.fake.calls_to("conversations.members")
    assert len(pages) == 3 and all(int(c.params["limit"]) < 1000 for c in pages)
