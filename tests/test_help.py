"""``/help [command]`` on every platform, generated from the registry: the list (one line
per command), one command (usage, arguments with examples, who may run it in the platform's
words) and an unknown name — answered as a command, never sent to the model as a message:
real discord.py against the loopback Discord, the real slack-bolt app, the console.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

from adapters.console_adapter import ConsoleChat
from bot.app import Runtime
from bot.features.registry import COMMANDS
from bot.settings import load_settings
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import GENERAL, W, followup_to, make_settings, running
from tests.harness.slack import KEY, Harness

EPHEMERAL = 64


def is_listing(text: str) -> None:
    """Every command on a line of its own, with its description."""
    lines = text.splitlines()
    for c in COMMANDS:
        assert f"{c.usage} — {c.description}" in lines, c.name


def is_catchup_help(text: str) -> None:
    assert text.startswith("Usage: /catchup [since] [time zone] [public]")
    assert "• since: " in text and "e.g. 2h, 3 days ago, yesterday" in text
    since = next(line for line in text.splitlines() if line.startswith("• since: "))
    assert since.count("3 days ago") == 1  # each example once, after "e.g."
    assert "your last message" in since  # what it is when left out
    assert "• public: " in text
    assert "Who may run it: anyone." in text
    assert "Who sees the answer: only you, unless you add public." in text


def is_unknown(text: str) -> None:
    assert text.startswith("I don't know /nosuch.")
    assert all(f"/{n}" in text for n in COMMANDS.names())


async def test_help_on_discord(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _):
        async def ask(**options: str) -> str:
            inter = await discord_fake.interaction("help", invoker=W.alice,
                                                   channel_id=W.general, options=options)
            answer = await followup_to(discord_fake, inter)
            assert answer.json["flags"] & EPHEMERAL
            return str(answer.json["content"])

        is_listing(await ask())
        is_catchup_help(await ask(command="catchup"))
        is_catchup_help(await ask(command="/catchup"))
        is_unknown(await ask(command="nosuch"))
        digest = await ask(command="digest")
        assert ("Who may run it: anyone; changing the schedule: members with Manage Channels"
                in digest)
        reset = await ask(command="reset")
        assert "Who may run it: members with Manage Messages" in reset
        config = await ask(command="config")
        assert "one of show, set, unset, history, usage" in config
        assert "the server's settings: members with Manage Server" in config
        assert discord_llm.chat_requests == []  # nothing went to the model
        assert await rt.store.turns(GENERAL) == []  # nor was it remembered as a message

        typed = await discord_fake.autocomplete("help", invoker=W.alice, channel_id=W.general,
                                                options={"command": "cat"}, focused="command")
        path = f"/interactions/{typed['id']}/{typed['token']}/callback"
        [suggested] = await discord_fake.wait_for(lambda f: f.calls("POST", path))
        assert suggested.json["data"]["choices"] == [{"name": "catchup", "value": "catchup"}]


async def test_help_on_slack(h: Harness) -> None:
    async def ask(text: str, n: int) -> str:
        status, _ = await h.command("/help", text=text)
        assert status == 200
        calls = await h.fake.wait_for("response_url:help", count=n)
        assert calls[-1].params["response_type"] == "ephemeral"
        return html.unescape(str(calls[-1].params["text"]))  # Slack escapes <, > and &

    is_listing(await ask("", 1))
    is_catchup_help(await ask("catchup", 2))
    is_unknown(await ask("nosuch", 3))
    reset = await ask("reset", 4)
    assert ("Who may run it: workspace admins and owners (or the users in "
            "SLACK_ADMIN_USER_IDS)") in reset
    assert "Ask about one command at a time" in await ask("catchup digest", 5)
    await h.settle()
    assert h.llm.purposes == []  # nothing went to the model
    assert await h.turns(KEY) == []


async def test_help_at_the_console(tmp_path: Path, discord_llm: FakeOpenAI) -> None:
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/c.db",
                              "OPENAI_BASE_URL": discord_llm.base_url, "MODEL_NAME": "gpt-test",
                              "LLM_MAX_RETRIES": "0"}, env_file=None)
    async with Runtime.open(settings) as rt:
        out = io.StringIO()
        chat = ConsoleChat(rt.features, user="erin", stdin=io.StringIO(), stdout=out)

        async def ask(line: str) -> str:
            before = len(out.getvalue())
            assert await chat.handle(line)
            return out.getvalue()[before:].rstrip("\n").replace("\\n", "\n")

        listing = await ask("/help")
        is_listing(listing)
        assert listing.endswith("/quit — leave (Ctrl-D too)")
        is_catchup_help(await ask("/help catchup"))
        is_unknown(await ask("/help nosuch"))
        assert "Who may run it: you (the operator at the terminal)" in await ask("/help reset")
        assert discord_llm.chat_requests == []  # nothing went to the model
        assert await rt.store.turns(chat.key) == []
