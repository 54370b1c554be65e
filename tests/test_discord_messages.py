"""Discord messages through a real discord.py client against a loopback Discord, the real
ChatService on real SQLite and the real openai SDK against the loopback OpenAI fake: what is
recorded, what is answered and where, long and streamed replies, edits, deletions and
missing permissions.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from adapters.discord.text import channel_key
from memory.models import ChannelKey
from tests.fakes.discord_server import FakeDiscord, Request, user
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.harness.discord import (
    W,
    fence_lines,
    has_turns,
    make_settings,
    mention,
    posted,
    running,
    turns,
)


async def test_people_are_recorded_bots_webhooks_and_itself_are_not_and_only_a_mention_is_answered(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.push("Alice said hello.")
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
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
        await watch.until(lambda: has_turns(rt, 3))
        assert await turns(rt) == [
            ("user", "Alice", "hello everyone"),
            ("user", "Bob", "@gistbot what did alice say?"),
            ("assistant", "gistbot", "Alice said hello."),
        ]
        assert len(discord_llm.chat_requests) == 1  # nothing else was answered
        assert len(discord_fake.sent_to(W.general)) == 1


async def test_messages_are_recorded_in_channel_order_while_a_reply_is_being_written(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.push("Sure.")
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(
            W.general, W.bob, mention("summarize please"), mentions=[W.bot_user]
        )
        await discord_fake.send_message(W.general, W.alice, "right after bob")
        await posted(discord_fake, W.general)
        await watch.until(lambda: has_turns(rt, 3))
        assert [(r, n) for r, n, _ in await turns(rt)] == [
            ("user", "Bob"),
            ("user", "Alice"),
            ("assistant", "gistbot"),
        ]


async def test_a_mention_is_answered_with_allowed_mentions_that_ping_nobody(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    discord_llm.push(f"@everyone @here <@{W.alice['id']}> <@&{W.mod_role}> look!")
    async with running(make_settings(tmp_path, discord_llm)):
        await discord_fake.send_message(
            W.general, W.alice, mention("ping everyone please"), mentions=[W.bot_user]
        )
        (reply,) = await posted(discord_fake, W.general)
        allowed = reply.json["allowed_mentions"]
        # Discord's default for replied_user is false; parse [] and no lists ping nobody.
        assert allowed == {"parse": []} or allowed == {"parse": [], "replied_user": False}
        assert "users" not in allowed and "roles" not in allowed


async def test_dm_thread_and_reply_to_the_bot_are_answered_where_they_came_from(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, _):
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
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
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
    discord_llm.push(text)
    async with running(make_settings(tmp_path, discord_llm)):
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
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    text = "\n\n".join(f"Section {i}. " + "lorem ipsum " * 150 for i in range(12))  # ~22k
    discord_llm.push(text)
    async with running(make_settings(tmp_path, discord_llm)):
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


async def test_edits_update_and_deletes_remove_turns(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        first = await discord_fake.send_message(W.general, W.alice, "meet at 5")
        second = await discord_fake.send_message(W.general, W.bob, "ok")
        await watch.until(lambda: has_turns(rt, 2))
        await discord_fake.edit_message(first, f"meet at 6 in <#{W.thread}>")

        async def edited() -> bool:
            return ("user", "Alice", "meet at 6 in #design-thread") in await turns(rt)

        await watch.until(edited)
        await discord_fake.delete_message(second)

        async def deleted() -> bool:
            return await turns(rt) == [("user", "Alice", "meet at 6 in #design-thread")]

        await watch.until(deleted)


async def test_missing_permissions_are_logged_once_per_channel_and_nothing_crashes(
    tmp_path: Path,
    discord_fake: FakeDiscord,
    discord_llm: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="adapters.discord.client")
    discord_fake.forbidden_channels.add(W.thread)  # Discord says 403 although the cache allows
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        for i in range(2):
            await discord_fake.send_message(
                W.readonly, W.alice, mention(f"q{i}"), mentions=[W.bot_user]
            )
            await discord_fake.send_message(
                W.thread, W.alice, mention(f"t{i}"), mentions=[W.bot_user]
            )
        readonly = channel_key(W.guild_id, W.readonly)
        await watch.until(lambda: has_turns(rt, 2, readonly))
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
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    words = [f"word{i} " for i in range(40)]
    discord_llm.push(Text("".join(words), chunks=words))
    settings = make_settings(tmp_path, discord_llm, STREAM_REPLIES="true")
    async with running(settings) as (_, client, _):
        outlet = client.flow.outlet
        assert outlet.stream_interval == 1.0  # the default
        outlet.stream_interval = 60.0  # no timing luck
        await discord_fake.send_message(
            W.general, W.alice, mention("stream it"), mentions=[W.bot_user]
        )
        (first,) = await posted(discord_fake, W.general)
        edits = await discord_fake.wait_for(lambda f: f.calls("PATCH", f"/channels/{W.general}/"))
        assert first.json["content"].startswith("word0") and "message_reference" in first.json
        # All deltas arrive within the interval: one message, then only the final edit.
        assert len(edits) == 1 and edits[0].json["content"] == "".join(words).strip()
        assert edits[0].json["allowed_mentions"]["parse"] == []

        outlet.stream_interval = 0.0
        discord_llm.push(Text("".join(words), chunks=words))
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
