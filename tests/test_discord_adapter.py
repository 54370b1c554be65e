"""The Discord adapter: a real discord.py client against a loopback Discord
(tests/fakes/discord_server.py), the real ChatService on real SQLite, and the real openai SDK
against the loopback OpenAI fake. ``to_incoming`` and the text helpers are unit-tested on
real discord.py objects built from gateway payloads, without a network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import discord
import pytest

from adapters.discord_adapter import (
    DiscordOptions,
    GistbotClient,
    channel_key,
    create_client,
    invite_url,
    run_discord,
    to_incoming,
)
from adapters.discord_text import plan_reply, preview, render_mentions
from bot.app import Runtime
from bot.errors import ConfigError
from bot.service import ChatService
from bot.settings import Settings, load_settings
from memory.models import ChannelKey
from tests.fakes.discord_server import (
    MANAGE_MESSAGES,
    FakeDiscord,
    Request,
    World,
    message,
    user,
)
from tests.fakes.openai_server import FakeOpenAI, Text, default_responder

TOKEN = "fake-discord-token"
W = World()
GENERAL = channel_key(W.guild_id, W.general)
FENCE_LINE = re.compile(r"^ {0,3}```", re.MULTILINE)


# ---------------------------------------------------------------- fixtures and helpers


@pytest.fixture
async def discord_fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """The loopback Discord, with discord.py pointed at it (tests only)."""
    async with FakeDiscord() as fake:
        monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base)
        monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", fake.gateway_url)
        yield fake


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    """The loopback OpenAI endpoint; unscripted requests get the deterministic default."""
    async with FakeOpenAI(responder=default_responder) as fake:
        yield fake


def make_settings(tmp_path: Path, llm: FakeOpenAI, **env: str) -> Settings:
    return load_settings(
        {
            "DISCORD_TOKEN": TOKEN,
            "OPENAI_BASE_URL": llm.base_url,
            "MODEL_NAME": "gpt-test",
            "LLM_MAX_RETRIES": "0",
            "LLM_TIMEOUT": "5",
            "DATABASE_URL": f"sqlite:///{tmp_path}/gistbot.db",
            **env,
        },
        env_file=None,
    )


class Watch:
    """Wakes waiters each time the service has finished handling an event, so tests wait
    on events (with a deadline) instead of polling the store."""

    def __init__(self, service: ChatService) -> None:
        self._changed = asyncio.Condition()
        for name in ("on_message", "edited", "deleted"):
            setattr(service, name, self._wrap(getattr(service, name)))

    def _wrap(self, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            try:
                return await method(*args, **kwargs)
            finally:
                async with self._changed:
                    self._changed.notify_all()

        return wrapped

    async def until(self, check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
        """Return once ``check()`` holds; ``TimeoutError`` after ``within`` seconds."""
        async with asyncio.timeout(within), self._changed:
            while not await check():
                await self._changed.wait()


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[tuple[Runtime, GistbotClient, Watch]]:
    """A runtime and a connected client that has seen READY; both closed on exit."""
    async with Runtime.open(settings) as rt:
        watch = Watch(rt.service)
        client = create_client(rt, guild_ready_timeout=0.05)
        async with client:
            task = asyncio.create_task(client.start(TOKEN))
            try:
                await asyncio.wait_for(client.wait_until_ready(), 10)
                yield rt, client, watch
            finally:
                await client.close()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait_for(task, 5)


async def turns(rt: Runtime, key: ChannelKey = GENERAL) -> list[tuple[str, str, str]]:
    return [(t.role, t.author_name, t.text) for t in await rt.store.turns(key)]


def mention(text: str) -> str:
    return f"<@{W.bot_id}> {text}"


async def posted(fake: FakeDiscord, channel_id: int, n: int = 1) -> list[Request]:
    """Wait for the bot's ``n``-th message in a channel; return all of them."""
    return list(
        await fake.wait_for(lambda f: len(f.sent_to(channel_id)) >= n and f.sent_to(channel_id))
    )


def fence_lines(text: str) -> int:
    return len(FENCE_LINE.findall(text))


# ---------------------------------------------------------------- pure parts


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
        DiscordOptions.from_settings(load_settings({}, env_file=None))
    with pytest.raises(ConfigError, match="DISCORD_GUILD_IDS"):
        DiscordOptions.from_settings(load_settings(base | {"DISCORD_GUILD_IDS": "abc"}))
    with pytest.raises(ConfigError, match="DISCORD_RESET_PERMISSION"):
        DiscordOptions.from_settings(load_settings(base | {"DISCORD_RESET_PERMISSION": "boss"}))
    opts = DiscordOptions.from_settings(
        load_settings(base | {"DISCORD_GUILD_IDS": "1, 2", "STREAM_REPLIES": "true"})
    )
    assert opts.guild_ids == (1, 2) and opts.stream_replies and opts.token == "t"


class Objects:
    """Real discord.py objects from gateway payloads, through a client's own state."""

    def __init__(self) -> None:
        self.client = discord.Client(intents=discord.Intents.default())
        self.state = self.client._connection
        self.state._add_guild(discord.Guild(data=W.guild_create(), state=self.state))  # type: ignore[arg-type]

    def message(
        self, channel_id: int, author: dict[str, Any], content: str, **kwargs: Any
    ) -> discord.Message:
        data = message(W, channel_id, author, content, **kwargs)
        channel, _ = self.state._get_guild_channel(data)  # type: ignore[arg-type]
        return discord.Message(state=self.state, channel=channel, data=data)  # type: ignore[arg-type]


@pytest.fixture
def objects() -> Objects:
    return Objects()


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


# ---------------------------------------------------------------- against the fake Discord


async def test_login_ready_identity_and_global_command_sync(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, llm)) as (rt, client, _):
        assert client.user is not None and client.user.id == W.bot_id
        assert [g.id for g in client.guilds] == [W.guild_id]
        assert rt.service.identity("discord") == (str(W.bot_id), "gistbot")
        assert discord_fake.identifies[0]["shard"] == [0, 1]  # auto-sharded, one shard here
        intents = discord.Intents._from_value(discord_fake.identifies[0]["intents"])
        assert intents == discord.Intents(
            guilds=True, guild_messages=True, dm_messages=True, message_content=True
        )
        assert client.allowed_mentions is not None
        assert client.allowed_mentions.to_dict() == {"parse": []}
        (sync,) = discord_fake.calls("PUT", f"/applications/{W.app_id}/")
        assert sync.path == f"/applications/{W.app_id}/commands"
        commands = {c["name"]: c for c in sync.json}
        assert set(commands) == {"summary", "reset", "remember", "memory", "forget"}
        assert int(commands["reset"]["default_member_permissions"]) == MANAGE_MESSAGES
        assert int(commands["forget"]["default_member_permissions"]) == MANAGE_MESSAGES
        assert commands["remember"]["default_member_permissions"] is None
        assert commands["summary"]["default_member_permissions"] is None
        (option,) = commands["summary"]["options"]
        assert (option["name"], option["type"], option["required"]) == ("public", 5, False)


async def test_commands_sync_instantly_to_configured_guilds(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, llm, DISCORD_GUILD_IDS=str(W.guild_id))
    async with running(settings):
        (sync,) = discord_fake.calls("PUT", f"/applications/{W.app_id}/")
        assert sync.path == f"/applications/{W.app_id}/guilds/{W.guild_id}/commands"
        assert {c["name"] for c in sync.json} == {"summary", "reset", "remember", "memory",
                                                  "forget"}


async def test_run_discord_connects_and_stops_when_cancelled(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with Runtime.open(make_settings(tmp_path, llm)) as rt:
        task = asyncio.create_task(run_discord(rt))
        await discord_fake.wait_for(lambda f: f.identifies)
        assert discord_fake.identifies[0]["token"] == TOKEN
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        await discord_fake.wait_for(lambda f: not f.connected)


async def test_run_discord_with_a_rejected_token_is_a_config_error(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    discord_fake.token = "another-token"
    async with Runtime.open(make_settings(tmp_path, llm)) as rt:
        with pytest.raises(ConfigError, match="DISCORD_TOKEN was rejected"):
            await asyncio.wait_for(run_discord(rt), 10)


async def test_people_are_recorded_bots_webhooks_and_itself_are_not_and_only_a_mention_is_answered(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    llm.push("Alice said hello.")
    async with running(make_settings(tmp_path, llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "hello everyone")
        await discord_fake.send_message(W.general, W.other_bot, "beep boop")
        hook = user(500_000_000_000_000_005, "Hook")
        await discord_fake.send_message(W.general, hook, "via webhook", webhook_id=9)
        await discord_fake.send_message(W.general, W.bot_user, "something I said earlier")
        trigger = await discord_fake.send_message(
            W.general, W.bob, mention("what did alice say?"), mentions=[W.bot_user]
        )
        (reply,) = await posted(discord_fake, W.general)
        assert reply.json["content"] == "Alice said hello."
        assert str(reply.json["message_reference"]["message_id"]) == trigger["id"]
        typing = discord_fake.calls("POST", f"/channels/{W.general}/typing")
        assert typing and typing[0].at <= reply.at
        await watch.until(lambda: _count(rt, 3))
        assert await turns(rt) == [
            ("user", "Alice", "hello everyone"),
            ("user", "Bob", "@gistbot what did alice say?"),
            ("assistant", "gistbot", "Alice said hello."),
        ]
        assert len(llm.chat_requests) == 1  # nothing else was answered
        assert len(discord_fake.sent_to(W.general)) == 1


async def test_messages_are_recorded_in_channel_order_while_a_reply_is_being_written(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    llm.push("Sure.")
    async with running(make_settings(tmp_path, llm)) as (rt, _, watch):
        await discord_fake.send_message(
            W.general, W.bob, mention("summarize please"), mentions=[W.bot_user]
        )
        await discord_fake.send_message(W.general, W.alice, "right after bob")
        await posted(discord_fake, W.general)
        await watch.until(lambda: _count(rt, 3))
        assert [(r, n) for r, n, _ in await turns(rt)] == [
            ("user", "Bob"),
            ("user", "Alice"),
            ("assistant", "gistbot"),
        ]


async def _count(rt: Runtime, n: int, key: ChannelKey = GENERAL) -> bool:
    return len(await rt.store.turns(key)) >= n


async def test_a_mention_is_answered_with_allowed_mentions_that_ping_nobody(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    llm.push(f"@everyone @here <@{W.alice['id']}> <@&{W.mod_role}> look!")
    async with running(make_settings(tmp_path, llm)):
        await discord_fake.send_message(
            W.general, W.alice, mention("ping everyone please"), mentions=[W.bot_user]
        )
        (reply,) = await posted(discord_fake, W.general)
        allowed = reply.json["allowed_mentions"]
        # Discord's default for replied_user is false; parse [] and no lists ping nobody.
        assert allowed == {"parse": []} or allowed == {"parse": [], "replied_user": False}
        assert "users" not in allowed and "roles" not in allowed


async def test_dm_thread_and_reply_to_the_bot_are_answered_where_they_came_from(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, llm)) as (rt, _, _):
        await discord_fake.send_message(W.dm_channel, W.alice, "hi in private")
        (dm,) = await posted(discord_fake, W.dm_channel)
        assert dm.json["content"] == "You said: [Alice]: hi in private"
        dm_turns = await turns(rt, ChannelKey("discord", "dm", str(W.dm_channel)))
        assert [role for role, _, _ in dm_turns] == ["user", "assistant"]

        await discord_fake.send_message(
            W.thread, W.bob, mention("thread question"), mentions=[W.bot_user]
        )
        (in_thread,) = await posted(discord_fake, W.thread)
        assert "thread question" in in_thread.json["content"]

        (bot_message,) = [
            m
            for m in discord_fake.messages.values()
            if m["channel_id"] == str(W.thread) and m["author"]["id"] == str(W.bot_id)
        ]
        await discord_fake.send_message(W.thread, W.alice, "and a follow-up", reply_to=bot_message)
        answers = await posted(discord_fake, W.thread, 2)
        assert "and a follow-up" in answers[1].json["content"]
        await discord_fake.send_message(W.thread, W.alice, "not for the bot")
        await discord_fake.send_message(W.thread, W.alice, mention("last"), mentions=[W.bot_user])
        answers = await posted(discord_fake, W.thread, 3)
        assert "last" in answers[2].json["content"] and len(answers) == 3
        thread_turns = await turns(rt, ChannelKey("discord", str(W.guild_id), str(W.thread)))
        assert [role for role, _, _ in thread_turns] == ["user", "assistant"] * 2 + [
            "user",
            "user",
            "assistant",
        ]


async def test_a_long_reply_is_split_with_balanced_fences(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    code = "\n".join(f"    result_{i} = compute({i})  # step {i}" for i in range(120))
    text = (
        "Here is the plan.\n\n"
        + "Some explanation. " * 60
        + "\n\n```python\n"
        + code
        + "\n```\n\nThat is all."
    )
    assert 4000 < len(text) < 8000
    llm.push(text)
    async with running(make_settings(tmp_path, llm)):
        trigger = await discord_fake.send_message(
            W.general, W.alice, mention("show me code"), mentions=[W.bot_user]
        )
        await discord_fake.wait_for(
            lambda f: any("That is all." in r.json["content"] for r in f.sent_to(W.general))
        )
        sent = discord_fake.sent_to(W.general)
        contents = [r.json["content"] for r in sent]
        assert 3 <= len(contents) <= 4
        assert all(len(c) <= 2000 for c in contents)
        assert all(fence_lines(c) % 2 == 0 for c in contents)
        assert any(c.startswith("```python\n") for c in contents[1:])  # reopened with its tag
        assert str(sent[0].json["message_reference"]["message_id"]) == trigger["id"]
        assert all("message_reference" not in r.json for r in sent[1:])
        assert all(r.json["allowed_mentions"]["parse"] == [] for r in sent)
        assert not any(r.files for r in sent)
        joined = "".join(contents)
        assert re.sub(r"```(python)?|\s", "", joined) == re.sub(r"```(python)?|\s", "", text)


async def test_a_very_long_reply_sends_the_rest_as_a_text_file(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    text = "\n\n".join(f"Section {i}. " + "lorem ipsum " * 150 for i in range(12))  # ~22k
    llm.push(text)
    async with running(make_settings(tmp_path, llm)):
        await discord_fake.send_message(
            W.general, W.alice, mention("tell me everything"), mentions=[W.bot_user]
        )
        sent = await posted(discord_fake, W.general, 4)
        assert len(sent) == 4 and [bool(r.files) for r in sent] == [False, False, False, True]
        ((name, data),) = sent[3].files
        assert name == "reply.txt"
        rest = data.decode()
        whole = "".join(r.json["content"] for r in sent) + rest
        assert re.sub(r"\s", "", whole) == re.sub(r"\s", "", text)
        assert rest.rstrip().endswith("lorem ipsum")


async def test_summary_is_deferred_then_answered_ephemerally(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "the launch is on Friday")
        await discord_fake.send_message(W.general, W.bob, "ticket OPS-42 tracks it")
        await watch.until(lambda: _count(rt, 2))

        inter = await discord_fake.interaction("summary", invoker=W.alice, channel_id=W.general)
        followup = await _followup(discord_fake, inter)
        (callback,) = discord_fake.calls("POST", f"/interactions/{inter['id']}/")
        assert callback.path == f"/interactions/{inter['id']}/{inter['token']}/callback"
        assert callback.json == {"type": 5, "data": {"flags": 64}}
        assert callback.at <= followup.at
        assert followup.json["flags"] & 64
        assert "OPS-42" in followup.json["content"]
        assert "Remembering 2 messages" in followup.json["content"]
        assert followup.json["allowed_mentions"]["parse"] == []

        public = await discord_fake.interaction(
            "summary", invoker=W.alice, channel_id=W.general, options={"public": True}
        )
        shown = await _followup(discord_fake, public)
        (callback,) = discord_fake.calls("POST", f"/interactions/{public['id']}/")
        assert callback.json == {"type": 5}
        assert not shown.json.get("flags", 0) & 64


async def _followup(fake: FakeDiscord, inter: dict[str, Any]) -> Request:
    path = f"/webhooks/{W.app_id}/{inter['token']}"
    reqs = await fake.wait_for(lambda f: f.calls("POST", path))
    return reqs[0]  # type: ignore[no-any-return]


async def test_summary_of_an_empty_channel_says_so(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, llm)):
        inter = await discord_fake.interaction("summary", invoker=W.alice, channel_id=W.readonly)
        followup = await _followup(discord_fake, inter)
        assert "Nothing to summarize" in followup.json["content"]
        assert llm.chat_requests == []


async def test_reset_is_refused_without_permission_and_done_with_it(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "remember the code word: heron")
        await discord_fake.send_message(W.general, W.bob, "noted")
        await watch.until(lambda: _count(rt, 2))

        refused = await discord_fake.interaction("reset", invoker=W.alice, channel_id=W.general)
        answer = await _followup(discord_fake, refused)
        (callback,) = discord_fake.calls("POST", f"/interactions/{refused['id']}/")
        assert callback.json == {"type": 5, "data": {"flags": 64}}
        assert "Manage Messages permission" in answer.json["content"]
        assert answer.json["flags"] & 64
        assert len(await turns(rt)) == 2

        done = await discord_fake.interaction(
            "reset", invoker=W.bob, channel_id=W.general, permissions=MANAGE_MESSAGES
        )
        answer = await _followup(discord_fake, done)
        assert answer.json["content"] == "Done: I forgot 2 messages from this channel."
        assert answer.json["flags"] & 64
        assert await turns(rt) == []


async def test_memory_survives_a_restart_on_the_same_sqlite_file(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, llm)
    async with running(settings) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "my order number is 77-4417")
        await watch.until(lambda: _count(rt, 1))
    async with running(settings) as (rt, _, watch):
        llm.push("It is 77-4417.")
        await discord_fake.send_message(
            W.general, W.bob, mention("what is alice's order?"), mentions=[W.bot_user]
        )
        (reply,) = await posted(discord_fake, W.general)
        assert reply.json["content"] == "It is 77-4417."
        prompt = " ".join(str(m["content"]) for m in llm.chat_requests[-1].json["messages"])
        assert "77-4417" in prompt and "Alice" in prompt
        assert len(await turns(rt)) == 3


async def test_edits_update_and_deletes_remove_turns(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, llm)) as (rt, _, watch):
        first = await discord_fake.send_message(W.general, W.alice, "meet at 5")
        second = await discord_fake.send_message(W.general, W.bob, "ok")
        await watch.until(lambda: _count(rt, 2))
        await discord_fake.edit_message(first, f"meet at 6 in <#{W.thread}>")

        async def edited() -> bool:
            return ("user", "Alice", "meet at 6 in #design-thread") in await turns(rt)

        await watch.until(edited)
        await discord_fake.delete_message(second)

        async def deleted() -> bool:
            return await turns(rt) == [("user", "Alice", "meet at 6 in #design-thread")]

        await watch.until(deleted)


async def test_missing_permissions_are_logged_once_per_channel_and_nothing_crashes(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="adapters.discord_adapter")
    discord_fake.forbidden_channels.add(W.thread)  # Discord says 403 although the cache allows
    async with running(make_settings(tmp_path, llm)) as (rt, _, watch):
        for i in range(2):
            await discord_fake.send_message(
                W.readonly, W.alice, mention(f"q{i}"), mentions=[W.bot_user]
            )
            await discord_fake.send_message(
                W.thread, W.alice, mention(f"t{i}"), mentions=[W.bot_user]
            )
        readonly = channel_key(W.guild_id, W.readonly)
        await watch.until(lambda: _count(rt, 2, readonly))
        await discord_fake.wait_for(lambda f: len(f.sent_to(W.thread)) >= 2)
        # Still alive: a mention elsewhere is answered.
        await discord_fake.send_message(
            W.general, W.alice, mention("still there?"), mentions=[W.bot_user]
        )
        await posted(discord_fake, W.general)
        assert [t[0] for t in await turns(rt, readonly)] == ["user", "user"]  # recorded
    assert discord_fake.sent_to(W.readonly) == []  # not even tried: no Send Messages
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("#announcements" in w and "'Send Messages'" in w for w in warnings) == 1
    assert sum("#design-thread" in w and "'Send Messages in Threads'" in w for w in warnings) == 1


async def test_streamed_reply_is_edited_at_most_once_per_interval(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    words = [f"word{i} " for i in range(40)]
    llm.push(Text("".join(words), chunks=words))
    async with running(make_settings(tmp_path, llm, STREAM_REPLIES="true")) as (_, client, _):
        assert client.options.stream_interval == 1.0  # the default
        client.options = replace(client.options, stream_interval=60.0)  # no timing luck
        await discord_fake.send_message(
            W.general, W.alice, mention("stream it"), mentions=[W.bot_user]
        )
        (first,) = await posted(discord_fake, W.general)
        edits = await discord_fake.wait_for(lambda f: f.calls("PATCH", f"/channels/{W.general}/"))
        assert first.json["content"].startswith("word0") and "message_reference" in first.json
        # All deltas arrive within the interval: one message, then only the final edit.
        assert len(edits) == 1 and edits[0].json["content"] == "".join(words).strip()
        assert edits[0].json["allowed_mentions"]["parse"] == []

        client.options = replace(client.options, stream_interval=0.0)
        llm.push(Text("".join(words), chunks=words))
        await discord_fake.send_message(W.general, W.bob, mention("again"), mentions=[W.bot_user])
        full = "".join(words).strip()

        def finished(f: FakeDiscord) -> list[Request]:
            edits = f.calls("PATCH", f"/channels/{W.general}/")[1:]
            return edits if edits and edits[-1].json["content"] == full else []

        second_edits = await discord_fake.wait_for(finished)
        assert len(discord_fake.sent_to(W.general)) == 2
        assert len(second_edits) >= 20  # an edit per delta, as the interval is 0
        grew = [len(e.json["content"].strip()) for e in second_edits]
        assert grew == sorted(grew)


async def test_shard_settings_start_only_this_process_shards(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    from adapters.discord_adapter import run_discord

    settings = make_settings(tmp_path, llm, SHARD_COUNT="4", SHARD_IDS="1,3")
    async with Runtime.open(settings) as rt:
        task = asyncio.create_task(run_discord(rt))
        try:
            await discord_fake.wait_for(lambda f: len(f.identifies) >= 2, within=20)
            assert sorted(i["shard"] for i in discord_fake.identifies) == [[1, 4], [3, 4]]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_remember_memory_forget_commands_with_forget_needing_permission(
    tmp_path: Path, discord_fake: FakeDiscord, llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, llm)) as (rt, _, _):
        pinned = await discord_fake.interaction(
            "remember", invoker=W.alice, channel_id=W.general,
            options={"text": "the demo is on Thursday"},
        )
        answer = await _followup(discord_fake, pinned)
        (callback,) = discord_fake.calls("POST", f"/interactions/{pinned['id']}/")
        assert callback.json == {"type": 5, "data": {"flags": 64}}  # deferred, ephemeral
        assert answer.json["content"].startswith("Remembered as fact #")
        [fact] = await rt.memory.facts(GENERAL)
        assert fact.text == "the demo is on Thursday" and fact.pinned

        listing = await _followup(discord_fake, await discord_fake.interaction(
            "memory", invoker=W.alice, channel_id=W.general))
        assert listing.json["flags"] & 64
        assert f"[fact #{fact.id}] the demo is on Thursday" in listing.json["content"]

        refused = await _followup(discord_fake, await discord_fake.interaction(
            "forget", invoker=W.alice, channel_id=W.general, options={"fact": str(fact.id)}))
        assert "Manage Messages permission" in refused.json["content"]
        assert refused.json["flags"] & 64
        assert len(await rt.memory.facts(GENERAL)) == 1

        done = await _followup(discord_fake, await discord_fake.interaction(
            "forget", invoker=W.bob, channel_id=W.general, permissions=MANAGE_MESSAGES,
            options={"fact": "demo"}))
        assert done.json["content"] == f"Forgot fact #{fact.id}: the demo is on Thursday"
        assert await rt.memory.facts(GENERAL) == []
        assert llm.chat_requests == []
