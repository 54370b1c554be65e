"""Kill the real Slack adapter mid-burst and count what Slack would have lost.

``crash_run`` starts ``tests/slack_crash_child.py`` (``run_slack`` in HTTP mode on a real
SQLite file, against a ``FakeSlack`` in this process), sends signed events at ``rate`` a
second — every ``mention_every``-th one mentions the bot — SIGKILLs the child at a random
moment, restarts it and goes on, ``kills`` times. Like Slack, it delivers again every event
that did not get a 200 (with ``X-Slack-Retry-Num``) until one does. At the end it reads the
database: an acknowledged event whose turn is missing is *lost*, a message id stored twice
is a *duplicate*; a mention whose answer the fake Slack shows twice is *answered twice*.
Used by ``tests/test_slack_crash.py`` (a few kills) and by ``benchmarks/slack_ack.py``
(200 kills, and the ack-time figures).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from tests.fakes.slack_api import FakeSlack
from tests.harness.deadlines import scaled
from tests.harness.slack import directory, event_body, mention, sign

__all__ = ["Child", "CrashResult", "burst_run", "crash_run", "owed_drained", "percentile"]

ROOT = Path(__file__).resolve().parent.parent.parent
ANSWER = "Hello from the model."  # the child's model's answer, as posted


@dataclass
class CrashResult:
    sent: int = 0  # distinct events
    deliveries: int = 0  # including re-deliveries
    acked: set[int] = field(default_factory=set)
    kills: int = 0
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    mentions: int = 0
    answered: int = 0  # reply turns stored (one per mention at most: ``reply:<id>``)
    misanswered: list[str] = field(default_factory=list)  # replies not to their mention
    owed_left: int = -1  # replies still owed when the run ended (0: every debt settled)
    answered_twice: list[str] = field(default_factory=list)  # mentions with two answer posts
    ack_seconds: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, object]:
        return {
            "events": self.sent, "deliveries": self.deliveries, "kills": self.kills,
            "acknowledged": len(self.acked), "acknowledged_but_lost": len(self.lost),
            "duplicates": len(self.duplicates), "mentions": self.mentions,
            "replies_stored": self.answered, "replies_still_owed": self.owed_left,
            "replies_not_to_their_mention": len(self.misanswered),
            "answered_twice": len(self.answered_twice),
            "ack_p50_ms": round(1000 * percentile(self.ack_seconds, 50), 1),
            "ack_p99_ms": round(1000 * percentile(self.ack_seconds, 99), 1),
            "ack_max_ms": round(1000 * max(self.ack_seconds, default=0.0), 1),
        }  # fmt: skip


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


_TS: dict[int, str] = {}


def message_ts(i: int) -> str:
    """Event ``i``'s Slack ts: the wall-clock second it was first made, ``i`` as the
    fraction (unique), so a mention's age is real (``ANSWER_MISSED_SECONDS`` applies)."""
    if i not in _TS:
        _TS[i] = f"{int(time.time())}.{i:06d}"
    return _TS[i]


def event_for(i: int, mention_every: int) -> dict[str, object]:
    if mention_every and i % mention_every == 0:
        return mention(f"<@UBOT> question {i}?", ts=message_ts(i), kind="message")
    return mention(f"message {i} about order {i * 7}", ts=message_ts(i), kind="message")


class Child:
    """One run of the child process (Socket Mode when ``app_token`` is given)."""

    def __init__(self, db: Path, api_url: str, app_token: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.db, self.api_url, self.app_token = db, api_url, app_token
        self.env = env or {}
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""

    async def start(self) -> str:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.slack_crash_child", str(self.db), self.api_url,
            *(["socket", self.app_token] if self.app_token else []),
            cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT), **self.env},
        )  # fmt: skip
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), scaled(60))
        except BaseException:
            await self.end()
            raise
        if not line.startswith(b"READY "):
            await self.end()
            raise AssertionError(f"the child did not start: {line!r}")
        self.url = line.decode().split()[1]
        return self.url

    async def __aenter__(self) -> Child:
        """Started; killed and waited on leaving, whatever happened."""
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.end()

    async def end(self) -> None:
        """Killed if still running, and waited."""
        self.kill()
        await self.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)

    async def wait(self) -> None:
        if self.proc is not None:
            await self.proc.wait()


async def _deliver(
    http: aiohttp.ClientSession, url: str, i: int, tries: dict[int, int],
    mention_every: int, result: CrashResult,
) -> bool:
    """One delivery of event ``i``; True on 200 (acknowledged)."""
    retry = tries.get(i, 0)
    tries[i] = retry + 1
    body = json.dumps(event_body(event_for(i, mention_every), event_id=f"Ev{i}"))
    headers = {"Content-Type": "application/json", **sign(body)}
    if retry:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    result.deliveries += 1
    started = time.perf_counter()
    try:
        async with http.post(url, data=body.encode(), headers=headers,
                             timeout=aiohttp.ClientTimeout(total=10)) as r:
            await r.read()
            ok = r.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False
    if ok:
        result.ack_seconds.append(time.perf_counter() - started)
        result.acked.add(i)
    return ok


class SocketAcks:
    """Socket Mode deliveries: send an envelope through the fake, wait for its ack (or for
    the child's death, ``fail_all``)."""

    def __init__(self, fake: FakeSlack) -> None:
        self.fake = fake
        self.waiting: dict[str, asyncio.Future[bool]] = {}
        self._seen = 0
        self._task = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            received = self.fake.socket_received
            for m in received[self._seen:]:
                fut = self.waiting.pop(str(m.get("envelope_id")), None)
                if fut is not None and not fut.done():
                    fut.set_result(True)
            self._seen = len(received)
            await asyncio.sleep(0.002)

    async def deliver(self, eid: str, payload: dict[str, object], retry: int) -> bool:
        fut = asyncio.get_running_loop().create_future()
        self.waiting[eid] = fut
        envelope = {
            "envelope_id": eid, "type": "events_api", "accepts_response_payload": False,
            "retry_attempt": retry, "retry_reason": "timeout" if retry else "",
            "payload": payload}  # fmt: skip
        try:
            # Straight onto the open socket: ``socket_send`` waits on the fake's condition,
            # which thousands of concurrent senders would hold against the acks it reads.
            if sockets := self.fake._sockets:
                await sockets[0].send_str(json.dumps(envelope))
            else:
                await self.fake.socket_send(envelope, within=2)
        except (ConnectionError, AssertionError, RuntimeError, TimeoutError):
            self.waiting.pop(eid, None)
            return False
        return await fut

    def fail_all(self) -> None:
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_result(False)
        self.waiting.clear()

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def _socket_gone(fake: FakeSlack) -> None:
    """Wait until the fake has seen the killed child's websocket close."""
    for _ in range(500):
        if not fake._sockets:  # the harness may look inside its own fake
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the killed child's websocket is still open")


async def crash_run(
    tmp: Path,
    *,
    kills: int,
    rate: float = 200.0,
    mention_every: int = 20,
    kill_window: tuple[float, float] = (0.2, 1.2),
    seed: int = 14,
    socket_mode: bool = False,
) -> CrashResult:
    """See the module docstring; the database is ``tmp / 'gistbot.db'``."""
    _TS.clear()  # a new run's events get their own (current) times
    rng = random.Random(seed)
    db = tmp / "gistbot.db"
    result = CrashResult()
    pending: list[int] = []  # not acknowledged yet: delivered again first
    tries: dict[int, int] = {}
    nxt = 0
    async with FakeSlack() as fake, aiohttp.ClientSession() as http:
        directory(fake)
        acks = SocketAcks(fake) if socket_mode else None

        async def over_socket(i: int) -> bool:
            assert acks is not None
            retry = tries.get(i, 0)
            tries[i] = retry + 1
            result.deliveries += 1
            started = time.perf_counter()
            body = event_body(event_for(i, mention_every), event_id=f"Ev{i}")
            if not await acks.deliver(f"env-{i}-{retry}", body, retry):
                return False
            result.ack_seconds.append(time.perf_counter() - started)
            result.acked.add(i)
            return True

        def deliver(i: int) -> asyncio.Task[bool]:
            if socket_mode:
                return asyncio.create_task(over_socket(i))
            return asyncio.create_task(_deliver(http, url, i, tries, mention_every, result))

        for run in range(kills + 1):
            child = Child(db, fake.api_url, fake.app_token if socket_mode else None)
            url = await child.start()
            try:
                if run < kills:  # a burst at ``rate``, backlog first, until the kill
                    deadline = time.monotonic() + rng.uniform(*kill_window)
                    order, sent_here, started = list(pending), 0, time.monotonic()
                    tasks: dict[int, asyncio.Task[bool]] = {}
                    while time.monotonic() < deadline:
                        if order:
                            i = order.pop(0)
                        else:
                            i, nxt = nxt, nxt + 1
                        tasks[i] = deliver(i)
                        sent_here += 1
                        await asyncio.sleep(max(0.0, started + sent_here / rate - time.monotonic()))
                    child.kill()
                    result.kills += 1
                    await child.wait()
                    if acks is not None:
                        await _socket_gone(fake)
                        acks.fail_all()
                    await asyncio.gather(*tasks.values())
                    pending = order + [i for i, t in tasks.items() if not t.result()]
                else:  # the last run is not killed: deliver until every event is in
                    for _ in range(10):
                        if not pending:
                            break
                        done = await asyncio.gather(*(deliver(i) for i in pending))
                        pending = [i for i, ok in zip(pending, done, strict=True) if not ok]
                    # Replies in flight finish, and the mentions a kill left unanswered are
                    # answered by the restarted process's sweep (bot.missed.owed): wait for
                    # the debts.
                    await asyncio.sleep(1.0)
                    result.owed_left = await owed_drained(db, within=scaled(90.0))
                    child.kill()
            finally:
                await child.end()
        if acks is not None:
            await acks.close()
        assert not pending, f"{len(pending)} events never acknowledged"
        posted = Counter(str(m.get("thread_ts")) for m in fake.bot_messages("C1")
                         if m.get("text") == ANSWER)
        result.answered_twice = sorted(ts for ts, n in posted.items() if n > 1)
    result.sent = nxt
    result.mentions = len([i for i in range(nxt) if mention_every and i % mention_every == 0])
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT message_id FROM turns WHERE role = 'user'").fetchall()
        result.answered = conn.execute(
            "SELECT count(*) FROM turns WHERE role = 'assistant'").fetchone()[0]
        replies = conn.execute(
            "SELECT q.text, a.text, q.message_id FROM turns a JOIN turns q "
            "ON q.channel_id = a.channel_id AND a.message_id = 'reply:' || q.message_id "
            "WHERE a.role = 'assistant'").fetchall()
        dup = conn.execute("SELECT message_id FROM turns GROUP BY channel_id, message_id "
                           "HAVING count(*) > 1").fetchall()  # fmt: skip
    stored = {str(r[0]) for r in rows}
    result.lost = sorted(message_ts(i) for i in result.acked if message_ts(i) not in stored)
    result.duplicates = [str(r[0]) for r in dup]
    # The child's model answers "You said: <last message>": the last message of each
    # answer's request must be its own mention ("question <i>?").
    result.misanswered = [str(ts) for asked, answer, ts in replies
                          if (m := re.search(r"question \d+\?", asked)) is None
                          or m.group() not in answer]
    return result


async def owed_drained(db: Path, *, within: float) -> int:
    """Wait until no reply is owed in ``db`` (or ``within`` seconds); how many still are."""
    deadline = time.monotonic() + within
    while True:
        with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
            left = int(conn.execute("SELECT count(*) FROM owed_replies").fetchone()[0])
        if left == 0 or time.monotonic() > deadline:
            return left
        await asyncio.sleep(0.25)


async def burst_run(
    tmp: Path, *, events: int = 2000, rate: float | None = 200.0, socket_mode: bool = False
) -> CrashResult:
    """``events`` events, ``rate`` a second (None: all at once; HTTP then uses up to 100
    connections, as aiohttp pools them), to one child, nothing killed: the acknowledgement
    times under a burst, from sending to the 200 or the envelope ack."""
    db = tmp / "gistbot.db"
    result = CrashResult()
    tries: dict[int, int] = {}
    async with FakeSlack() as fake, aiohttp.ClientSession() as http:
        directory(fake)
        child = Child(db, fake.api_url, fake.app_token if socket_mode else None)
        url = await child.start()
        acks = SocketAcks(fake) if socket_mode else None
        try:
            if acks is not None:
                async def one(i: int) -> bool:
                    started = time.perf_counter()
                    body = event_body(event_for(i, 20), event_id=f"Ev{i}")
                    ok = await acks.deliver(f"env-{i}", body, 0)
                    if ok:
                        result.ack_seconds.append(time.perf_counter() - started)
                        result.acked.add(i)
                    return ok

                send = one
            else:
                def send(i: int) -> Awaitable[bool]:
                    return _deliver(http, url, i, tries, 20, result)

            tasks, began = [], time.monotonic()
            for i in range(events):
                tasks.append(asyncio.ensure_future(send(i)))
                if rate:
                    await asyncio.sleep(max(0.0, began + (i + 1) / rate - time.monotonic()))
            done = list(await asyncio.gather(*tasks))
            result.sent = result.deliveries = events
            assert all(done), f"{done.count(False)} of {events} not acknowledged"
        finally:
            if acks is not None:
                await acks.close()
            child.kill()
            await child.wait()
    return result
