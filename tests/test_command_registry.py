"""One command registry: a command declared in one new file of ``bot.commands`` (here a
test-only ``ping.py``, written to a folder the package reads) is found by the registry's
discovery and is on every platform — in the application-command sync payload discord.py
sends the loopback Discord and answered there, dispatched by the real slack-bolt app and
answered on its ``response_url``, run by the console — and in the Slack manifest, whose
checked-in ``slash_commands`` are the registry's."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import bot.commands
from adapters.console_adapter import ConsoleChat
from adapters.slack import manifest
from bot.app import Runtime
from bot.commands.declare import Registry
from bot.commands.registry import COMMANDS, discover
from bot.features.registry import COMMANDS as TABLE
from bot.settings import load_settings
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import W, followup_to, make_settings, running
from tests.harness.slack import FakeLLM, open_harness

# The whole of a new command: this file, dropped into bot/commands/, and nothing else.
PING_PY = """
from dataclasses import dataclass

from bot.arguments import ArgumentError, CommandSpec
from bot.commands.declare import Argument, Command, Context, Permission
from bot.messages import CommandResult


@dataclass(frozen=True)
class PingArgs:
    word: str


def _grammar(text: str) -> PingArgs:
    if len(text.split()) > 1:
        raise ArgumentError("One word: /ping [word].")
    return PingArgs(text.strip() or "nothing")


async def _ping(ctx: Context, args: PingArgs) -> CommandResult:
    allowed = await ctx.may(Permission.EVERYONE)
    return CommandResult(f"pong {args.word} from {await ctx.user_name()} ({allowed})")


COMMANDS = (Command(
    CommandSpec("ping", "[word]", "Usage: /ping [word].", _grammar), "Answer with pong",
    _ping, (Argument("word", "What to say back", examples=("hello",)),)),)
"""


def add_command_file(folder: Path, name: str, text: str,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``folder/name`` read as a module of ``bot.commands``, as a file put in the package."""
    (folder / name).write_text(text, encoding="utf-8")
    monkeypatch.setattr(bot.commands, "__path__", [*bot.commands.__path__, str(folder)])
    monkeypatch.delitem(sys.modules, f"bot.commands.{name.removesuffix('.py')}", raising=False)


@pytest.fixture
def with_ping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Registry]:
    """The registry as discovery finds it with ``ping.py`` among the command modules."""
    folder = tmp_path / "new_commands"
    folder.mkdir()
    add_command_file(folder, "ping.py", PING_PY, monkeypatch)
    yield discover()
    sys.modules.pop("bot.commands.ping", None)


def test_discovery_finds_the_new_file_and_keeps_the_declared_order(
    with_ping: Registry
) -> None:
    assert COMMANDS.names() == ["summary", "reset", "remember", "memory", "forget", "config",
                                "catchup", "digest", "help"]
    assert TABLE.names() == [*COMMANDS.names()[:5], "aboutme", *COMMANDS.names()[5:]]  # features
    # no ORDER: after the features that declare one below the default, before /help
    assert with_ping.names() == [*COMMANDS.names()[:-1], "ping", "help"]


def test_a_module_whose_commands_are_not_commands_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_command_file(tmp_path, "broken.py", "ORDER = 1\nCOMMANDS = ('ping',)\n", monkeypatch)
    with pytest.raises(TypeError, match=r"bot\.commands\.broken\.COMMANDS"):
        discover()
    sys.modules.pop("bot.commands.broken", None)


async def test_a_new_command_is_on_discord_from_its_declaration(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI, with_ping: Registry
) -> None:
    async with running(make_settings(tmp_path, discord_llm), commands=with_ping):
        [sync] = await discord_fake.wait_for(lambda f: f.calls("PUT", "/applications/"))
        by_name = {c["name"]: c for c in sync.json}
        assert set(by_name) == {*COMMANDS.names(), "ping"}
        assert by_name["ping"]["description"] == "Answer with pong"
        [option] = by_name["ping"]["options"]
        assert option | {"required": False} == {
            "name": "word", "description": "What to say back", "type": 3, "required": False}

        inter = await discord_fake.interaction("ping", invoker=W.alice, channel_id=W.general,
                                               options={"word": "hi"})
        answer = await followup_to(discord_fake, inter)
        assert answer.json["content"] == "pong hi from Alice (True)"
        assert answer.json["flags"] & 64  # only the caller
        assert discord_llm.chat_requests == []


async def test_the_default_registry_has_no_test_command(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)):
        [sync] = await discord_fake.wait_for(lambda f: f.calls("PUT", "/applications/"))
        assert sorted(c["name"] for c in sync.json) == sorted(TABLE.names())


async def test_a_new_command_is_dispatched_by_slack_bolt(
    tmp_path: Path, with_ping: Registry
) -> None:
    async with open_harness(tmp_path, FakeLLM(), {}, commands=with_ping) as h:
        status, _ = await h.command("/ping", text="hey", user="U1")
        assert status == 200
        [call] = await h.fake.wait_for("response_url:ping")
        assert call.params["text"] == "pong hey from Alice (True)"
        assert call.params["response_type"] == "ephemeral"
        status, _ = await h.command("/ping", text="two words")
        [_, refused] = await h.fake.wait_for("response_url:ping", count=2)
        assert refused.params["text"] == "One word: /ping [word]."


async def test_slack_without_the_feature_does_not_answer_it(tmp_path: Path) -> None:
    async with open_harness(tmp_path, FakeLLM(), {}) as h:
        status, _ = await h.command("/ping", text="hey")
        assert status == 404  # bolt: no listener for the command
        await h.settle()
        assert h.fake.calls_to("response_url:ping") == []


async def test_a_new_command_runs_at_the_console(tmp_path: Path, with_ping: Registry) -> None:
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/c.db"}, env_file=None)
    async with Runtime.open(settings) as rt:
        out = io.StringIO()
        chat = ConsoleChat(rt.features, user="erin", stdin=io.StringIO(), stdout=out,
                           commands=with_ping)
        assert await chat.handle("/ping yo")
        assert await chat.handle("/help")
        assert await rt.store.turns(chat.key) == []  # a command, not a message
        without = io.StringIO()
        plain = ConsoleChat(rt.features, user="erin", stdin=io.StringIO(), stdout=without)
        assert await plain.handle("/ping yo")
        assert "pong" not in without.getvalue()
        assert (await rt.store.turns(chat.key))[0].text == "/ping yo"  # a message
    lines = out.getvalue().splitlines()
    assert lines[0] == "pong yo from erin (True)"
    assert "\\n/ping [word] — Answer with pong\\n" in lines[1]  # batch mode: one line


def test_the_manifest_section_is_generated_from_the_registry(with_ping: Registry) -> None:
    text = manifest.update(manifest.MANIFEST.read_text(encoding="utf-8"), with_ping)
    entries = yaml.safe_load(text)["features"]["slash_commands"]
    assert [e["command"] for e in entries] == [f"/{n}" for n in with_ping.names()]
    [ping] = [e for e in entries if e["command"] == "/ping"]
    assert ping == {"command": "/ping", "description": "Answer with pong",
                    "usage_hint": "[word]", "should_escape": False}


def test_the_checked_in_manifest_matches_the_registry(with_ping: Registry) -> None:
    """Fails when a command is added, renamed or described anew without regenerating the
    manifest (``python -m adapters.slack.manifest``)."""
    text = manifest.MANIFEST.read_text(encoding="utf-8")
    assert manifest.update(text) == text
    assert manifest.update(text, with_ping) != text
    assert manifest.main(["--check"]) == 0
    entries = yaml.safe_load(text)["features"]["slash_commands"]
    assert [e["command"] for e in entries] == [f"/{n}" for n in TABLE.names()]
    assert {e["command"]: e["description"] for e in entries} == {
        f"/{c.name}": c.description for c in TABLE}


def test_the_check_fails_on_a_stale_manifest(tmp_path: Path) -> None:
    stale = tmp_path / "manifest.yaml"
    text = manifest.MANIFEST.read_text(encoding="utf-8")
    stale.write_text(text.replace("    - command: /help", "    - command: /helpme"))
    assert manifest.main(["--check", str(stale)]) == 1
    assert manifest.main([str(stale)]) == 0
    assert stale.read_text() == text
