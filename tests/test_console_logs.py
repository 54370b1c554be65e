"""The console chat stays a conversation: warnings print as one line each, never a
traceback, when the model misbehaves in the ways that log one — a summary rejected as a
non-answer (compaction retrying, ``/summary`` falling back to the stored summary), a reply
call retried after a 503, the embedding endpoint failing and retried. A bug's traceback
needs ``--verbose``; ``LOG_LEVEL=DEBUG`` shows every one."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from bot.ops.logs import setup_logging
from tests.fakes.openai_server import Error, FakeOpenAI, default_responder, is_summary_request
from tests.harness.console import Terminal, console_env, plain

REFUSAL = "I'm sorry, but I can't help with that."


def refusing_summaries(body: dict[str, object]) -> str:
    """Replies as usual; every summary a refusal, which the summarizer rejects."""
    return REFUSAL if is_summary_request(body) else default_responder(body)


@pytest.mark.slow
async def test_rejected_summaries_and_retries_print_no_traceback_in_the_chat(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(responder=refusing_summaries) as fake:
        fake.push(Error(503, {"error": {"message": "overloaded"}}))  # retried by the SDK
        fake.embedding_error = Error(500, {"error": {"message": "embedder down"}})
        env = console_env(tmp_path, OPENAI_BASE_URL=fake.base_url, MODEL_NAME="gpt-test",
                          LLM_MAX_RETRIES="1", MAX_HISTORY_MESSAGES="2",
                          KEEP_RECENT_MESSAGES="1", EMBEDDING_MODEL="embed-test")
        term = Terminal(tmp_path, "console", env=env)
        try:
            for i in range(4):
                await term.say(f"note {i}: ticket TCK-{i}")
            await fake.wait_for(lambda f: sum(
                1 for r in f.chat_requests if r.json and is_summary_request(r.json)) >= 1)
            await term.prompt()
            term.type("/summary\r")  # its digest is refused too: the stored summary
            await term.expect("this is the stored summary")
            if "embedding turns failed; retrying" not in plain(term.transcript):
                await term.expect("embedding turns failed; retrying")
            assert await term.quit() == 0
        finally:
            term.child.close(force=True)
    shown = plain(term.transcript)
    assert "compaction of console:local:general failed (SummaryRejected" in shown
    assert "showing the stored summary (SummaryRejected" in shown
    assert "Traceback" not in shown and 'File "' not in shown, shown


def _log_a_bug(**options: bool) -> str:
    """What the terminal shows for an unexpected exception logged at WARNING."""
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging("INFO", **options)
        root.handlers[0].stream = stream  # type: ignore[attr-defined]
        try:
            raise RuntimeError("a bug")
        except RuntimeError:
            logging.getLogger("bot.probe").warning("something broke", exc_info=True)
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
        logging.captureWarnings(False)
    return stream.getvalue()


def test_a_bug_in_the_console_is_one_line_unless_verbose() -> None:
    quiet = _log_a_bug(console=True)
    assert quiet.count("\n") == 1 and "Traceback" not in quiet
    assert "something broke (RuntimeError: a bug; --verbose shows the traceback)" in quiet
    assert "Traceback" in _log_a_bug(console=True, verbose=True)
    assert "Traceback" in _log_a_bug()  # `gistbot run`: a bug keeps its traceback
