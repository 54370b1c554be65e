"""A command's public answer on Discord is the command's own response, edited once into
place: one message everyone sees, what does not fit attached as a file, no follow-up
created (a follow-up takes no nonce and discord.py repeats it after a 5xx)."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import W, followup_to, has_turns, make_settings, running

LONG_POINT = "- The deploy window moved to the afternoon, " + "after the review " * 200 + "[1]"


async def test_a_long_public_answer_is_one_message_with_the_rest_attached(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (rt, _, watch):
        await discord_fake.send_message(W.general, W.alice, "deploy window is 14:00-15:00 UTC")
        await watch.until(lambda: has_turns(rt, 1))
        discord_llm.responder = lambda body: LONG_POINT
        inter = await discord_fake.interaction(
            "catchup", invoker=W.bob, channel_id=W.general, options={"since": "1d",
                                                                     "public": True})
        answer = await followup_to(discord_fake, inter)
        assert answer.method == "PATCH" and answer.path.endswith("/messages/@original")
        assert [name for name, _ in answer.files] == ["reply.txt"]
        assert "after the review" in answer.files[0][1].decode()
        assert not discord_fake.calls("POST", f"/webhooks/{W.app_id}/{inter['token']}")
        shown = [m for m in discord_fake.visible(W.general)
                 if m["author"]["id"] == W.bot_user["id"]]
        assert len(shown) == 1 and "deploy window" in shown[0]["content"].lower()
