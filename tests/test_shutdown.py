"""Graceful shutdown of the real ``gistbot run`` process (issue 14, item 2).

The bot runs as a child process against the loopback Slack, Discord and OpenAI fakes; the
model takes 4 s per reply. A burst of messages and a mention are sent, and SIGTERM arrives
while the mention's reply is in flight: the reply is delivered, every acknowledged message
is in the database, no "thinking…" placeholder is left, and the process exits 0 within
``SHUTDOWN_GRACE_SECONDS``. Also as PID 1 of a new PID namespace (where a process without
a SIGTERM handler would ignore it), and with a grace too short for the reply (an apology
replaces the placeholder; the mention is answered after the restart).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import aiohttp
import pytest

from bot.ops.shutdown import SHUTDOWN_APOLOGY
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack
from tests.harness.discord import GENERAL, W
from tests.harness.discord import mention as discord_mention
from tests.harness.process import (
    SIGINT,
    SIGTERM,
    BotProcess,
    bot_process,
    reply_requests,
    slack_env,
    slow_replies,
)
from tests.harness.slack import PLACEHOLDER, SECRET, directory, event_body, mention, sign

GRACE = 20.0


async def post_event(http: aiohttp.ClientSession, url: str, event: dict[str, object],
                     event_id: str) -> int:
    body = json.dumps(event_body(event, event_id=event_id))
    headers = {"Content-Type": "application/json"} | sign(body)
    async with http.post(url, data=body, headers=headers) as r:
        return r.status


def stored_ids(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT message_id FROM turns ORDER BY seq")]


def open_debts(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT message_id FROM owed_replies")]


def placeholders_left(slack: FakeSlack) -> int:
    """Placeholders posted and never replaced or deleted (every other post and edit of
    these tests targets a placeholder, so counting distinct targets is exact)."""
    posted = [c for c in slack.calls_to("chat.postMessage") if c.params.get("text") == PLACEHOLDER]
    replaced = {c.params["ts"] for c in slack.calls_to("chat.update")
                if c.params.get("text") != PLACEHOLDER}
    deleted = {c.params["ts"] for c in slack.calls_to("chat.delete")}
    return max(0, len(posted) - len(replaced | deleted))


def answers_to(slack: FakeSlack, needle: str) -> list[str]:
    """Every text the bot posted or edited in that contains ``needle``."""
    texts = [c.params.get("text", "") for c in slack.calls_to("chat.postMessage")]
    texts += [c.params.get("text", "") for c in slack.calls_to("chat.update")]
    return [t for t in texts if needle in t]


async def slack_burst_then_signal(
    bot: BotProcess, slack: FakeSlack, llm: FakeOpenAI, sig: int, pid: int | None = None
) -> list[str]:
    """40 messages, a mention, the signal once its reply is in flight, then more messages
    until the listener is gone; returns the ts of every acknowledged message."""
    url = (await bot.wait_log(r"listening on (\S+)")).group(1)
    acked: list[str] = []
    base = int(time.time())  # recent: a mention older than ANSWER_MISSED_SECONDS is let go
    async with aiohttp.ClientSession() as http:
        for i in range(40):
            ts = f"{base - 1}.{i:06d}"
            event = mention(f"plain message {i}", ts=ts, kind="message")
            if await post_event(http, url, event, f"EvB{i}") == 200:
                acked.append(ts)
        assert await post_event(http, url, mention(ts=f"{base}.000100"), "EvM") == 200
        acked.append(f"{base}.000100")
        await llm.wait_for(lambda m: reply_requests(m) >= 1, within=20)
        bot.send(sig, pid)
        for i in range(40, 400):
            ts = f"{base - 1}.{i:06d}"
            try:
                status = await post_event(http, url, mention(f"late {i}", ts=ts, kind="message"),
                                          f"EvB{i}")
            except aiohttp.ClientConnectionError:
                break  # the listener closed: Slack would retry these later
            if status == 200:
                acked.append(ts)
            await asyncio.sleep(0.005)
    return acked


def mention_ts(acked: list[str]) -> str:
    """The mention's ts among the acknowledged messages (the only one ending in 100)."""
    [ts] = [a for a in acked if a.endswith(".000100") and a.split(".")[0] != acked[0].split(".")[0]]
    return ts


@pytest.mark.slow
@pytest.mark.parametrize("sig", [SIGTERM, SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_slack_http_signal_with_a_reply_in_flight_loses_nothing(
    tmp_path: Path, sig: int
) -> None:
    db = tmp_path / "bot.db"
    async with FakeSlack() as slack, slow_replies(4.0) as llm:
        directory(slack)
        env = slack_env(f"sqlite:///{db}", slack, llm, SECRET,
                        SHUTDOWN_GRACE_SECONDS=str(GRACE))
        async with bot_process(env) as bot:
            acked = await slack_burst_then_signal(bot, slack, llm, sig)
            code = await bot.wait(within=GRACE + 10)
    print(f"acknowledged {len(acked)}, stopped {bot.stop_seconds:.2f} s after the signal")
    assert code == 0, bot.log
    assert bot.stop_seconds < GRACE, bot.log
    assert "stopped cleanly" in bot.log
    assert len(answers_to(slack, "You said: ")) == 1  # the reply in flight, delivered
    assert placeholders_left(slack) == 0
    ids = stored_ids(db)
    assert [a for a in acked if a not in ids] == []  # 0 acknowledged-but-lost
    assert len(ids) == len(set(ids))
    assert f"reply:{mention_ts(acked)}" in ids
    assert open_debts(db) == []


@pytest.mark.slow
async def test_discord_sigterm_with_a_reply_in_flight_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "bot.db"
    async with FakeDiscord() as discord, slow_replies(4.0) as llm:
        env = {
            "DATABASE_URL": f"sqlite:///{db}", "DISCORD_TOKEN": "fake-discord-token",
            "GISTBOT_TEST_DISCORD_API": discord.api_base,
            "GISTBOT_TEST_DISCORD_GATEWAY": str(discord.gateway_url),
            "OPENAI_BASE_URL": llm.base_url, "MODEL_NAME": "gpt-test", "LLM_MAX_RETRIES": "0",
            "SHUTDOWN_GRACE_SECONDS": str(GRACE),
        }  # fmt: skip
        async with bot_process(env) as bot:
            await bot.wait_log("connected to Discord")
            sent = [await discord.send_message(W.general, W.alice, f"plain {i}")
                    for i in range(30)]
            asked = await discord.send_message(W.general, W.alice,
                                               discord_mention("what about order 1234?"))
            await llm.wait_for(lambda m: reply_requests(m) >= 1, within=20)
            bot.send(SIGTERM)
            code = await bot.wait(within=GRACE + 10)
        answers = [r.json["content"] for r in discord.sent_to(W.general)
                   if "You said" in str((r.json or {}).get("content"))]
    print(f"stopped {bot.stop_seconds:.2f} s after the signal, exit {code}")
    assert code == 0, bot.log
    assert bot.stop_seconds < GRACE, bot.log
    assert len(answers) == 1
    ids = stored_ids(db)
    assert {m["id"] for m in [*sent, asked]} <= set(ids)
    assert f"reply:{asked['id']}" in ids
    assert open_debts(db) == []
    assert GENERAL.platform == "discord"


@pytest.mark.slow
async def test_a_reply_that_cannot_finish_gets_an_apology_and_is_answered_after_restart(
    tmp_path: Path,
) -> None:
    db = tmp_path / "bot.db"
    async with FakeSlack() as slack, slow_replies(8.0) as llm:
        directory(slack)
        env = slack_env(f"sqlite:///{db}", slack, llm, SECRET, SHUTDOWN_GRACE_SECONDS="2")
        async with bot_process(env) as bot:
            acked = await slack_burst_then_signal(bot, slack, llm, SIGTERM)
            code = await bot.wait(within=10)
        print(f"stopped {bot.stop_seconds:.2f} s after the signal, exit {code}")
        assert code == 0, bot.log
        assert answers_to(slack, SHUTDOWN_APOLOGY)  # the placeholder became an apology
        assert placeholders_left(slack) == 0
        assert open_debts(db) == [mention_ts(acked)]  # released: owed, not forgotten
        llm.latency = None  # the model is quick again
        async with bot_process(slack_env(f"sqlite:///{db}", slack, llm, SECRET)) as again:
            await slack.wait_until(lambda: bool(answers_to(slack, "You said: ")), within=20)
            again.send(SIGTERM)
            assert await again.wait(within=GRACE) == 0, again.log
    assert len(answers_to(slack, "You said: ")) == 1
    [late] = [c for c in slack.calls_to("chat.postMessage") if "You said" in c.params["text"]]
    assert late.params["thread_ts"] == mention_ts(acked)
    assert open_debts(db) == []


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, timeout=10, check=False)
    return probe.returncode == 0


def _child_of(pid: int) -> int:
    """The (host) pid of ``pid``'s only child: the bot that is PID 1 inside the namespace."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


@pytest.mark.slow
@pytest.mark.skipif(not _unshare_works(), reason="needs root and `unshare --pid` (util-linux)")
async def test_sigterm_as_pid_1_of_a_pid_namespace(tmp_path: Path) -> None:
    db = tmp_path / "bot.db"
    async with FakeSlack() as slack, slow_replies(4.0) as llm:
        directory(slack)
        env = slack_env(f"sqlite:///{db}", slack, llm, SECRET)
        prefix = ["unshare", "--pid", "--fork", "--mount-proc"]
        async with bot_process(env, prefix=prefix) as bot:
            await bot.wait_log(r"^PID 1$")  # the bot is PID 1 of its namespace
            inner = _child_of(bot.proc.pid)
            acked = await slack_burst_then_signal(bot, slack, llm, SIGTERM, pid=inner)
            code = await bot.wait(within=GRACE + 10)  # unshare exits with the bot's status
    print(f"stopped {bot.stop_seconds:.2f} s after the signal, exit {code}")
    assert code == 0, bot.log
    assert bot.stop_seconds < GRACE
    assert len(answers_to(slack, "You said: ")) == 1
    assert placeholders_left(slack) == 0
    assert [a for a in acked if a not in stored_ids(db)] == []


@pytest.mark.slow
async def test_slack_socket_mode_sigterm_with_a_reply_in_flight(tmp_path: Path) -> None:
    db = tmp_path / "bot.db"
    base = int(time.time())
    async with FakeSlack() as slack, slow_replies(4.0) as llm:
        directory(slack)
        env = slack_env(f"sqlite:///{db}", slack, llm, SECRET, SLACK_APP_TOKEN=slack.app_token)
        del env["SLACK_SIGNING_SECRET"]
        async with bot_process(env) as bot:
            await bot.wait_log("connected in Socket Mode")
            events = [mention(f"plain {i}", ts=f"{base - 1}.{i:06d}", kind="message")
                      for i in range(30)] + [mention(ts=f"{base}.000100")]
            for n, event in enumerate(events):
                await slack.socket_send({
                    "envelope_id": f"env-{n}", "type": "events_api",
                    "accepts_response_payload": False, "retry_attempt": 0, "retry_reason": "",
                    "payload": event_body(event, event_id=f"Ev{n}"),
                })  # fmt: skip
            await llm.wait_for(lambda m: reply_requests(m) >= 1, within=20)
            bot.send(SIGTERM)
            code = await bot.wait(within=GRACE + 10)
    acked = {m["envelope_id"] for m in slack.socket_received if "envelope_id" in m}
    acked_ts = [str(e["ts"]) for n, e in enumerate(events) if f"env-{n}" in acked]
    print(f"stopped {bot.stop_seconds:.2f} s after the signal, exit {code}")
    assert code == 0, bot.log
    assert bot.stop_seconds < GRACE
    assert len(acked_ts) == len(events)
    assert [t for t in acked_ts if t not in stored_ids(db)] == []
    assert len(answers_to(slack, "You said: ")) == 1
    assert placeholders_left(slack) == 0
    assert open_debts(db) == []


@pytest.mark.slow
async def test_console_sigterm_with_a_reply_in_flight_prints_it_and_exits_0(
    tmp_path: Path,
) -> None:
    async with slow_replies(4.0) as llm:
        env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
               "OPENAI_BASE_URL": llm.base_url, "MODEL_NAME": "gpt-test",
               "LLM_MAX_RETRIES": "0"}
        async with bot_process(env, console=True) as bot:
            assert bot.proc.stdin is not None and bot.proc.stdout is not None
            bot.proc.stdin.write(b"what about order 1234?\n")
            await bot.proc.stdin.drain()
            await llm.wait_for(lambda m: reply_requests(m) >= 1, within=20)
            bot.send(SIGTERM)
            out = (await bot.proc.stdout.read()).decode()
            code = await bot.wait(within=GRACE + 10)
    print(f"stopped {bot.stop_seconds:.2f} s after the signal, exit {code}")
    assert code == 0, bot.log
    assert out.startswith("You said: ") and "what about order 1234?" in out
    assert bot.stop_seconds < GRACE


@pytest.mark.parametrize(("name", "bad"), [
    ("SHUTDOWN_GRACE_SECONDS", "0"), ("SHUTDOWN_GRACE_SECONDS", "soon"),
    ("ANSWER_MISSED_SECONDS", "-1"), ("REPLY_CLAIM_SECONDS", "0.5"),
])
def test_bad_shutdown_and_restart_settings_name_the_variable(name: str, bad: str) -> None:
    from bot.errors import ConfigError
    from bot.settings import load_settings

    with pytest.raises(ConfigError, match=name):
        load_settings({name: bad}, env_file=None)
    defaults = load_settings({}, env_file=None).restarts
    assert (defaults.shutdown_grace_seconds, defaults.answer_missed_seconds,
            defaults.reply_claim_seconds) == (20, 300, 30)


@pytest.mark.slow
@pytest.mark.parametrize(("summary_seconds", "committed"), [(1.0, True), (60.0, False)],
                         ids=["commits", "abandons"])
async def test_sigterm_lets_a_compaction_commit_or_abandon_cleanly(
    tmp_path: Path, summary_seconds: float, committed: bool
) -> None:
    """A compaction in flight at SIGTERM commits if it finishes within its share of the grace
    (a quarter, at most 5 s), else is cancelled having committed nothing; either way the
    file is consistent and every message is stored."""
    from tests.fakes.openai_server import default_responder, is_summary_request

    db = tmp_path / "bot.db"
    base = int(time.time())
    llm = FakeOpenAI(responder=default_responder, strict=False,
                     latency=lambda b: summary_seconds if is_summary_request(b) else 0.0)
    async with FakeSlack() as slack, llm:
        directory(slack)
        env = slack_env(f"sqlite:///{db}", slack, llm, SECRET, MAX_HISTORY_MESSAGES="4",
                        KEEP_RECENT_MESSAGES="2", SHUTDOWN_GRACE_SECONDS=str(GRACE))
        async with bot_process(env) as bot:
            url = (await bot.wait_log(r"listening on (\S+)")).group(1)
            async with aiohttp.ClientSession() as http:
                for i in range(8):
                    event = mention(f"order ORD-{i} is late", ts=f"{base}.{i:06d}",
                                    kind="message")
                    assert await post_event(http, url, event, f"EvC{i}") == 200
            await llm.wait_for(lambda m: any(is_summary_request(r.json or {})
                                             for r in m.chat_requests), within=20)
            bot.send(SIGTERM)
            code = await bot.wait(within=GRACE + 10)
    print(f"stopped {bot.stop_seconds:.2f} s after the signal, exit {code}")
    assert code == 0, bot.log
    assert bot.stop_seconds < GRACE
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        summary, folded = conn.execute("SELECT summary, folded_through FROM channels").fetchone()
        stored = conn.execute("SELECT count(*) FROM turns").fetchone()[0]
    assert stored == 8
    assert (folded > 0 and "ORD-0" in summary) if committed else (folded, summary) == (0, "")


@pytest.mark.slow
async def test_a_second_ctrl_c_while_stopping_exits_130_at_once(tmp_path: Path) -> None:
    db = tmp_path / "bot.db"
    # The reply would take far longer than the grace: only the second Ctrl-C ends it early.
    async with FakeDiscord() as discord, slow_replies(GRACE * 3) as llm:
        env = {
            "DATABASE_URL": f"sqlite:///{db}", "DISCORD_TOKEN": "fake-discord-token",
            "GISTBOT_TEST_DISCORD_API": discord.api_base,
            "GISTBOT_TEST_DISCORD_GATEWAY": str(discord.gateway_url),
            "OPENAI_BASE_URL": llm.base_url, "MODEL_NAME": "gpt-test", "LLM_MAX_RETRIES": "0",
            "SHUTDOWN_GRACE_SECONDS": str(GRACE),
        }  # fmt: skip
        async with bot_process(env) as bot:
            await bot.wait_log("connected to Discord")
            asked = await discord.send_message(W.general, W.alice,
                                               discord_mention("what about order 1234?"))
            await llm.wait_for(lambda m: reply_requests(m) >= 1, within=20)
            bot.send(SIGINT)
            await bot.wait_log("SIGINT: stopping")
            bot.send(SIGINT)
            code = await bot.wait(within=GRACE)  # the drain alone would take the whole grace
    assert code == 130, bot.log
    assert "SIGINT again: exiting now" in bot.log
    assert asked["id"] in stored_ids(db)  # stored before it was answered
