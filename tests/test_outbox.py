"""Every outgoing post exactly once, across a SIGKILL at the worst moment
(``bot.conversation.outbox``).

The real bot process kills itself at an exact point (``tests.harness.kill_points``): right
after the platform accepted a post and before the post was recorded (and the reply's debt
settled), or right after the "thinking…" placeholder was shown. The restarted process must
find the earlier post instead of posting again — Slack by the message metadata it reads
back, Discord by the enforced nonce — and put a late answer into its placeholder.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.slack.events import PLACEHOLDER
from bot.stores import Storage
from bot.stores.digests import DigestSchedule
from memory.models import ChannelKey, NewTurn
from memory.stores.sqlite.store import SqliteStore
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.slack_api import FakeSlack
from tests.harness.children import ended
from tests.harness.deadlines import scaled
from tests.harness.discord import W, mention
from tests.harness.kill_points import ENV
from tests.harness.slack import KEY, directory, event_body, sign
from tests.harness.slack import mention as slack_mention
from tests.harness.slack_crash import Child, owed_drained

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
ANSWER = "You said: [Alice]: @gistbot question?"  # the Slack child's model echoes the mention


async def deliver(url: str, event: dict[str, Any], event_id: str) -> int:
    """One signed Slack event to the child; its HTTP status."""
    body = json.dumps(event_body(event, event_id=event_id))
    headers = {"Content-Type": "application/json", **sign(body)}
    async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as r:
        return r.status


async def deliver_to_dying(url: str, event: dict[str, Any], event_id: str) -> int | None:
    """Like :func:`deliver` to a child that kills itself on the way: its HTTP status, or
    None when the kill came before the acknowledgement was written (the placeholder can be
    posted while Bolt is still finishing the response)."""
    try:
        return await deliver(url, event, event_id)
    except aiohttp.ServerDisconnectedError:
        return None


async def killed(child: Child) -> int:
    """The exit status of a child that kills itself (fails if it never does)."""
    assert child.proc is not None
    return await asyncio.wait_for(child.proc.wait(), scaled(60))


async def restart_until_settled(db: Path, fake: FakeSlack) -> None:
    """Start the bot again and let its missed-mention sweep settle every debt."""
    async with Child(db, fake.api_url):
        assert await owed_drained(db, within=scaled(60)) == 0


def slack_texts(fake: FakeSlack) -> list[str]:
    """The bot's messages in the channel as people see them now."""
    return [str(m.get("text")) for m in fake.bot_messages(KEY.channel)]


async def test_slack_killed_between_delivery_and_settle_answers_once(tmp_path: Path) -> None:
    db = tmp_path / "gistbot.db"
    ts = f"{int(time.time())}.000100"
    async with FakeSlack() as fake:
        directory(fake)
        async with Child(db, fake.api_url, env={ENV: "outbox_posted,settle_owed"}) as dying:
            url = dying.url
            asked = slack_mention("<@UBOT> question?", ts=ts, kind="message")
            assert await deliver(url, asked, "Ev1") == 200
            assert await killed(dying) == -signal.SIGKILL
            assert slack_texts(fake) == [ANSWER]  # delivered; the kill came before the record
        await restart_until_settled(db, fake)
    assert slack_texts(fake) == [ANSWER]  # found again, not posted a second time


async def test_slack_late_answer_replaces_the_placeholder(tmp_path: Path) -> None:
    db = tmp_path / "gistbot.db"
    ts = f"{int(time.time())}.000200"
    async with FakeSlack() as fake:
        directory(fake)
        async with Child(db, fake.api_url, env={ENV: "placeholder"}) as dying:
            url = dying.url
            asked = slack_mention("<@UBOT> question?", ts=ts, kind="message")
            assert await deliver(url, asked, "Ev2") == 200
            assert await killed(dying) == -signal.SIGKILL
            assert slack_texts(fake) == [PLACEHOLDER]  # killed mid-reply
        await restart_until_settled(db, fake)
        [answer] = fake.bot_messages(KEY.channel)
    assert answer["text"] == ANSWER and answer["thread_ts"] == ts  # in place of "thinking…"


async def test_slack_late_answer_finds_a_placeholder_it_never_remembered(
    tmp_path: Path,
) -> None:
    db = tmp_path / "gistbot.db"
    ts = f"{int(time.time())}.000300"
    async with FakeSlack() as fake:
        directory(fake)
        async with Child(db, fake.api_url, env={ENV: "placeholder_posted"}) as dying:
            url = dying.url
            asked = slack_mention("<@UBOT> question?", ts=ts, kind="message")
            assert await deliver_to_dying(url, asked, "Ev3") in (200, None)
            assert await killed(dying) == -signal.SIGKILL
            assert slack_texts(fake) == [PLACEHOLDER]  # shown; killed before it was remembered
        await restart_until_settled(db, fake)
    assert slack_texts(fake) == [ANSWER]  # found by its outbox id, and replaced


async def test_slack_killed_after_the_first_intent_answers_once_into_the_placeholder(
    tmp_path: Path,
) -> None:
    """Killed once the answer's first intent was written (while the model answered),
    before anything was posted under it: the restart looks first and puts the answer into
    the placeholder, once."""
    db = tmp_path / "gistbot.db"
    ts = f"{int(time.time())}.000400"
    async with FakeSlack() as fake:
        directory(fake)
        async with Child(db, fake.api_url, env={ENV: "intent_recorded"}) as dying:
            asked = slack_mention("<@UBOT> question?", ts=ts, kind="message")
            assert await deliver_to_dying(dying.url, asked, "Ev4") in (200, None)
            assert await killed(dying) == -signal.SIGKILL
            assert ANSWER not in slack_texts(fake)
        await restart_until_settled(db, fake)
    assert slack_texts(fake) == [ANSWER]


# ---------------------------------------------------------------- Discord


def bot_messages(fake: FakeDiscord, channel_id: int) -> list[dict[str, Any]]:
    """The bot's messages in a channel as they stand now."""
    return [m for m in fake.history(channel_id) if m["author"]["id"] == W.bot_user["id"]]


async def start_discord_child(db: Path, fake: FakeDiscord,
                              env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.discord_child", str(db), fake.api_base,
        str(fake.gateway_url), cwd=ROOT, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


async def _discord_killed_at(db: Path, fake: FakeDiscord, point: str) -> None:
    """A bot that is SIGKILLed at ``point`` (``tests.harness.kill_points``) once a mention
    asks it something."""
    dying = await start_discord_child(db, fake, {ENV: point})
    try:
        await fake.wait_for(lambda f: f.connected, within=30)
        await fake.send_message(W.general, W.alice, mention("what about order 1234?"),
                                mentions=[W.bot_user])
        assert await asyncio.wait_for(dying.wait(), scaled(60)) == -signal.SIGKILL
    finally:
        if dying.returncode is None:
            dying.kill()
        await dying.wait()


async def _discord_restarted(db: Path, fake: FakeDiscord) -> None:
    """The bot started again on ``db`` until it owes no reply."""
    await fake.wait_for(lambda f: not f.connected, within=10)
    again = await start_discord_child(db, fake, {})
    try:
        assert await owed_drained(db, within=scaled(60)) == 0
    finally:
        await ended(again)


async def test_discord_killed_between_delivery_and_settle_answers_once(
    tmp_path: Path, discord_fake: FakeDiscord
) -> None:
    fake, db = discord_fake, tmp_path / "gistbot.db"
    await _discord_killed_at(db, fake, "outbox_posted,settle_owed")
    assert len(bot_messages(fake, W.general)) == 1  # delivered before the kill
    await _discord_restarted(db, fake)
    [answer] = bot_messages(fake, W.general)  # the retry got the first message back
    assert len(fake.sent_to(W.general)) == 2  # it was sent again, with the same nonce
    assert answer["message_reference"]["message_id"] is not None


async def test_discord_killed_after_the_first_intent_answers_once(
    tmp_path: Path, discord_fake: FakeDiscord
) -> None:
    """Killed once the answer's first intent was written, before it was posted: the
    restart posts it once (its nonce would return an earlier post, had there been one)."""
    fake, db = discord_fake, tmp_path / "gistbot.db"
    await _discord_killed_at(db, fake, "intent_recorded")
    assert bot_messages(fake, W.general) == []  # killed before the post
    await _discord_restarted(db, fake)
    [answer] = bot_messages(fake, W.general)
    assert answer["message_reference"]["message_id"] is not None


# ---------------------------------------------------------------- digests


SLACK = ChannelKey("slack", "T0TEAM", "C1")
SLOT = datetime(2026, 3, 9, 9, tzinfo=UTC).timestamp()  # a daily 09:00 UTC slot


async def seed_digest(db: Path) -> None:
    storage = Storage.on(SqliteStore(db))
    await storage.open()
    try:
        for i in range(6):
            at = SLOT - 3600 * (i + 1)
            await storage.memory.record(NewTurn(SLACK, f"{at:.0f}.000100", "user",
                                                f"u{i % 2}", f"P{i % 2}",
                                                f"update {i}: ticket TK-{100 + i} is done", 5,
                                                at))
        await storage.digests.set_digest_schedule(
            DigestSchedule(SLACK, "daily", -1, 9 * 60, "UTC", SLOT - 7 * 86400))
    finally:
        await storage.close()


def claim_expires(db: Path) -> float:
    with sqlite3.connect(db) as conn:
        return float(conn.execute("SELECT max(expires_at) FROM digest_slots").fetchone()[0])


async def run_digest_child(db: Path, fake: FakeSlack, tmp_path: Path,
                           env: dict[str, str]) -> int:
    go = tmp_path / "go"
    go.touch()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.digest_child", str(db), str(tmp_path / "posts.txt"),
        str(SLOT + 60), str(go), "1", fake.api_url, "0.5", cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    try:
        _, err = await asyncio.wait_for(proc.communicate(), scaled(60))
    finally:
        await ended(proc)
    assert b"Traceback" not in err, err.decode()
    assert proc.returncode is not None
    return proc.returncode


async def test_digest_killed_between_post_and_record_is_posted_once(tmp_path: Path) -> None:
    db = tmp_path / "gistbot.db"
    await seed_digest(db)
    async with FakeSlack() as fake:
        directory(fake)
        env = {ENV: "outbox_posted,finish_digest_slot"}
        assert await run_digest_child(db, fake, tmp_path, env) == -signal.SIGKILL
        assert len(fake.bot_messages("C1")) == 1  # posted; the kill came before the record
        deadline = time.monotonic() + 30
        while time.time() <= claim_expires(db):  # the dead claimer's claim runs out
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        assert await run_digest_child(db, fake, tmp_path, {}) == 0
        texts = [str(m["text"]) for m in fake.bot_messages("C1")]
    assert len(texts) == 1 and "Daily digest" in texts[0], texts
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT state FROM digest_slots").fetchall() == [("posted",)]
