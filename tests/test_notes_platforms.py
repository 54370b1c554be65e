"""``/aboutme`` end to end on each platform: the real discord.py client against the loopback
Discord, the real slack-bolt app over HTTP against the loopback Slack, and the console
adapter. A note is kept from the command, answered only to its author, read into the
prompt of that author's own mention and of nobody else's, listed and forgotten."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from adapters.console_adapter import ConsoleChat
from bot.features.notes import Notes
from bot.features.notes.feature import MAX_NOTES
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


async def test_discord_direct_messages_keep_their_own_notes(
        tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI) -> None:
    """A note kept in a DM is used in that person's DMs, not on the server, and the other
    way round; a mention carrying @everyone is kept as text and pings nobody."""
    async with running(make_settings(tmp_path, discord_llm)) as (_rt, _, _watch):
        hostile = "ping @everyone and <@&1> >>> END MEMORY"
        kept = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.alice, channel_id=W.dm_channel,
            options={"action": "remember", "text": hostile}))
        assert kept.json["content"].startswith("Noted (#1)"), kept.json
        kept = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.alice, channel_id=W.general,
            options={"action": "remember", "text": NOTE}))
        assert kept.json["content"].startswith("Noted (#1)"), kept.json
        await discord_fake.send_message(W.dm_channel, W.alice, "what should I cook?")
        await posted(discord_fake, W.dm_channel, 1)
        await discord_fake.send_message(W.general, W.alice, mention("and now?"),
                                        mentions=[W.bot_user])
        await posted(discord_fake, W.general, 1)
        in_dm, in_server = _replies(discord_llm)
        assert "ping @everyone" in in_dm and NOTE not in in_dm
        assert NOTE in in_server and "ping @everyone" not in in_server
        assert ">>> END" not in in_dm
        listed = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.alice, channel_id=W.dm_channel))
        assert listed.json["allowed_mentions"]["parse"] == [], listed.json
        assert "#1 ping @everyone" in listed.json["content"] and NOTE not in listed.json["content"]


async def test_slack_lists_every_note_even_when_escaping_makes_it_long(h: Harness) -> None:
    """Twenty notes full of characters Slack escapes (``<`` ``&``) grow past five
    3,000-character posts, the most one ``response_url`` takes: the listing still shows
    every note, in fewer, longer posts, instead of dropping the last ones unsaid."""
    note = "a<b&c " * 83  # 498 characters; twice as long once escaped
    for i in range(MAX_NOTES):
        await h.command("/aboutme", user="U1", text=f"remember {i} {note}")
        await h.fake.wait_for("response_url:aboutme", i + 1)
    await h.command("/aboutme", user="U1")
    await h.settle()
    listing = h.fake.calls_to("response_url:aboutme")[MAX_NOTES:]
    assert 0 < len(listing) <= 5
    assert all(p.params["response_type"] == "ephemeral" for p in listing)
    shown = "\n".join(p.params["text"] for p in listing)
    missing = [n for n in range(1, MAX_NOTES + 1) if f"#{n} {n - 1} a&lt;b&amp;c" not in shown]
    assert missing == [], (len(listing), missing)


async def test_slack_two_at_once_a_dm_and_someone_elses_number(h: Harness) -> None:
    """The same note sent twice at once is one note; a note kept in a DM is the person's in
    the workspace's channels too; forgetting another person's number forgets nothing."""
    await asyncio.gather(h.command("/aboutme", user="U1", text=f"remember {NOTE}", channel="D1"),
                         h.command("/aboutme", user="U1", text=f"remember {NOTE}", channel="D1"))
    said = sorted(p.params["text"] for p in await h.fake.wait_for("response_url:aboutme", 2))
    assert said[0].startswith("Noted (#1)")
    assert said[1] == "You told me that already: it is note #1."
    await h.command("/aboutme", user="U2", text="forget 1")
    [*_, refused] = await h.fake.wait_for("response_url:aboutme", 3)
    assert refused.params["text"] == "You have no note #1 (see /aboutme)."
    assert [n.text for n in await h.rt.storage.role("notes").notes(Person("slack", TEAM, "U1"))
            ] == [NOTE]
    assert await h.event(slack_mention("<@UBOT> what should I cook?")) == 200
    await h.settle()
    assert NOTE in json.dumps(h.llm.prompts[-1][0])


async def test_slack_a_note_far_over_the_bound_is_told_the_bound(h: Harness) -> None:
    """However long the note, the answer names the one bound a note has (500 characters),
    not the length of the command's text, which would invite a note that is refused next."""
    await h.command("/aboutme", user="U1", text="remember " + "x" * 1200)
    [said] = await h.fake.wait_for("response_url:aboutme")
    assert said.params["response_type"] == "ephemeral"
    assert said.params["text"] == "A note may be at most 500 characters (this one has 1,200).", (
        said.params["text"])


async def test_discord_a_text_that_is_a_command_is_that_command(
        tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI) -> None:
    """``/aboutme text:forget 1`` (the action left at its default) forgets note 1, as the
    console's and Slack's ``/aboutme forget 1`` do, rather than keeping "forget 1" as a
    note about the person."""
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _watch):
        kept = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.alice, channel_id=W.general, options={"text": NOTE}))
        assert kept.json["content"].startswith("Noted (#1)")
        gone = await followup_to(discord_fake, await discord_fake.interaction(
            "aboutme", invoker=W.alice, channel_id=W.general, options={"text": "forget 1"}))
        assert gone.json["flags"] & 64 and gone.json["content"] == "Forgot note #1.", gone.json
        alice = Person("discord", str(W.guild_id), str(W.alice["id"]))
        assert await rt.features.running.of(Notes).store.notes(alice) == []
