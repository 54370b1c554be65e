"""The lookup rule (``bot.conversation.lookup``) on its own, against a scripted outlet: an
unknown outcome is looked up before a post is repeated, edits and deletes are repeated,
a refusal is not, and nothing is tried more than ``ATTEMPTS`` times."""

from __future__ import annotations

from collections import deque

import pytest

from bot.conversation.lookup import ATTEMPTS, LookedUp, looked_up
from bot.conversation.outbox import Outbox, Post
from bot.errors import OutcomeUnknown
from memory.models import ChannelKey

KEY = ChannelKey("test", "w", "c")
POST = Post(KEY, "reply:test:w:c:1#0", "the answer")
UNKNOWN = OutcomeUnknown("HTTP 500")


class ScriptedOutlet:
    """Answers each call from its script (an exception is raised); fails loudly when a
    call comes that nobody scripted."""

    def __init__(self, **script: list[object]) -> None:
        self.script = {name: deque(answers) for name, answers in script.items()}
        self.calls: list[str] = []

    def _next(self, name: str) -> object:
        self.calls.append(name)
        answer = self.script[name].popleft()
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def post(self, post: Post) -> str | None:
        return self._next("post")  # type: ignore[return-value]

    async def edit(self, post: Post, message_id: str) -> bool:
        return self._next("edit")  # type: ignore[return-value]

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        return self._next("delete")  # type: ignore[return-value]

    async def find(self, post: Post) -> str | None:
        return self._next("find")  # type: ignore[return-value]


async def test_a_post_of_unknown_outcome_that_took_effect_is_found_not_posted_again() -> None:
    outlet = ScriptedOutlet(post=[UNKNOWN], find=["m1"])
    assert await LookedUp(outlet).post(POST) == "m1"
    assert outlet.calls == ["post", "find"]


async def test_a_post_of_unknown_outcome_that_did_not_take_effect_is_posted_again() -> None:
    outlet = ScriptedOutlet(post=[UNKNOWN, "m2"], find=[None])
    assert await LookedUp(outlet).post(POST) == "m2"
    assert outlet.calls == ["post", "find", "post"]


async def test_a_post_that_stays_unknown_is_given_up_after_the_attempts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outlet = ScriptedOutlet(post=[UNKNOWN] * ATTEMPTS, find=[None] * ATTEMPTS)
    assert await LookedUp(outlet).post(POST) is None
    assert outlet.calls == ["post", "find"] * ATTEMPTS
    assert "gave up posting" in caplog.text


async def test_a_refused_post_is_not_repeated() -> None:
    outlet = ScriptedOutlet(post=[None])
    assert await LookedUp(outlet).post(POST) is None
    assert outlet.calls == ["post"]


@pytest.mark.parametrize("call", ["edit", "delete"])
async def test_edits_and_deletes_of_unknown_outcome_are_repeated(call: str) -> None:
    outlet = ScriptedOutlet(**{call: [UNKNOWN, True]})
    rule = LookedUp(outlet)
    done = await (rule.edit(POST, "m1") if call == "edit" else rule.delete(KEY, "m1"))
    assert done and outlet.calls == [call, call]


async def test_the_outbox_puts_every_outlet_under_the_rule_once() -> None:
    outlet = ScriptedOutlet(post=[UNKNOWN], find=["m1"])
    assert looked_up(looked_up(outlet)).outlet is outlet  # type: ignore[attr-defined]
    assert await Outbox(None).send(outlet, POST) == "m1"
    assert outlet.calls == ["post", "find"]


async def test_a_lookup_that_cannot_read_is_tried_again_not_posted_blind() -> None:
    """The platform could not be read: that is no "not there" (the post may stand)."""
    outlet = ScriptedOutlet(post=[UNKNOWN], find=[UNKNOWN, "m1"])
    assert await LookedUp(outlet).post(POST) == "m1"
    assert outlet.calls == ["post", "find", "find"]


async def test_a_post_whose_lookup_never_reads_is_given_up_not_repeated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outlet = ScriptedOutlet(post=[UNKNOWN], find=[UNKNOWN] * ATTEMPTS)
    assert await LookedUp(outlet).post(POST) is None
    assert outlet.calls == ["post"] + ["find"] * ATTEMPTS
    assert "gave up posting" in caplog.text


async def test_a_lookup_that_reads_not_there_after_an_unreadable_one_posts_again() -> None:
    outlet = ScriptedOutlet(post=[UNKNOWN, "m2"], find=[UNKNOWN, None])
    assert await LookedUp(outlet).post(POST) == "m2"
    assert outlet.calls == ["post", "find", "find", "post"]

