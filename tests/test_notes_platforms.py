"""``/aboutme`` end to end on each platform: the real discord.py client against the loopback
Discord, the real slack-bolt app over HTTP against the loopback Slack, and the console
adapter. A note is kept from the command, answered only to its author, read into the
prompt of that author's own mention and of nobody else's, listed and forgotten."""

from __future__ import annotations

import io
import json
from pathlib import Path

from adapters.console_adapter import ConsoleChat
from bot.features.notes import Notes
from bot.features.notes.store import Person
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, default_responder, is_summary_request
from tests.harness.discord import W, followup_to, make_settings, mention, posted, running
from tests.harness.service import bodies, runtime
from tests.harness.slack import TEAM, Harness
from tests.harness.slack import mention as slack_mention

NOTE = "I am vegetarian and my cat is called Biscuit"


def _replies(fake: FakeOpenAI) -> list[str]:
    """The system message of each reply request ``fake`` received."""
    return [json.dumps(r.json["messages"][0]) for r in fake.chat_requests
            if r.json is not None and not is_summary_request(r.json)]


async def test_discord(tmp_path: Path, discord_fake: FakeDiscord,
                       discord_llm: FakeOpenAI) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _watch):
        kept = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.alice, channel_id=W.general,
            options={"action": "remember", "text": NOTE}))
        assert kept.json["flags"] & 64  # only the caller sees it
        assert kept.json["content"].startswith("Noted (#1)")
        assert kept.json["allowed_mentions"]["parse"] == []
        alice = Person("discord", str(W.guild_id), str(W.alice["id"]))
        assert [n.text for n in await rt.features.running.of(Notes).store.notes(alice)] == [NOTE]

        await discord_fake.send_message(W.general, W.alice, mention("what should I cook?"),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.general, 1)
        await discord_fake.send_message(W.general, W.bob, mention("and for me?"),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.general, 2)
        for_alice, for_bob = _replies(discord_llm)
        assert NOTE in for_alice and NOTE not in for_bob

        listed = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.alice, channel_id=W.general))
        assert listed.json["flags"] & 64 and f"#1 {NOTE}" in listed.json["content"]
        theirs = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.bob, channel_id=W.general))
        assert NOTE not in theirs.json["content"]  # shown only to its author
        bobs = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.bob, channel_id=W.general, options={"text": "call me Rob"}))
        assert bobs.json["content"].startswith("Noted (#1)"), bobs.json  # a text alone is kept
        gone = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.alice, channel_id=W.general,
            options={"action": "forget", "text": "all"}))
        assert gone.json["flags"] & 64 and "Forgot all your notes" in gone.json["content"]


async def test_slack(h: Harness) -> None:
    status, _ = await h.command("/aboutme", user="U1", text=f"remember {NOTE}")
    assert status == 200
    [kept] = await h.fake.wait_for("response_url:aboutme")
    assert kept.params["response_type"] == "ephemeral"
    assert kept.params["text"].startswith("Noted (#1)")

    assert await h.event(slack_mention("<@UBOT> what should I cook?")) == 200
    assert await h.event(slack_mention("<@UBOT> and for me?", user="U2",
                                       ts="1700000000.000200"), event_id="Ev2") == 200
    await h.settle()
    for_alice, for_bob = (json.dumps(p[0]) for p in h.llm.prompts)
    assert NOTE in for_alice and NOTE not in for_bob

    await h.command("/aboutme", user="U2")
    theirs = (await h.fake.wait_for("response_url:aboutme", 2))[1]
    await h.command("/aboutme", user="U1", text="forget 1")
    gone = (await h.fake.wait_for("response_url:aboutme", 3))[2]
    assert theirs.params["response_type"] == gone.params["response_type"] == "ephemeral"
    assert NOTE not in theirs.params["text"] and gone.params["text"] == "Forgot note #1."
    assert await h.rt.storage.role("notes").notes(Person("slack", TEAM, "U1")) == []


async def test_console(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, runtime(tmp_path, fake) as rt:
        out = io.StringIO()
        chat = ConsoleChat(rt.features, user="erin", stdin=io.StringIO(), stdout=out)
        assert await chat.handle(f"/aboutme remember {NOTE}")
        assert await chat.handle("what should I cook?")
        assert await chat.handle("/aboutme")
        assert await chat.handle("/aboutme forget all")
        lines = out.getvalue().splitlines()
        assert lines[0].startswith("Noted (#1)")
        assert NOTE in json.dumps(bodies(fake, summary=False)[-1]["messages"][0])
        assert any(f"#1 {NOTE}" in line for line in lines)
        assert "Forgot all your notes on this server (1)." in out.getvalue()
        assert all(NOTE not in t.text for t in await rt.store.turns(chat.key))  # not a message
