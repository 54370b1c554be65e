"""Slack HTTP mode in front of bolt (issue 15): oversized bodies 413 unread, the signature
checked before any parsing or logging, malformed bodies 400 (never a 500 with a
traceback), request bodies never logged above DEBUG, and no forged log lines."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

import pytest
from slack_sdk.signature import SignatureVerifier

from adapters.slack.transport import MAX_BODY_BYTES, escape
from tests.harness.slack import KEY, Harness, mention, sign

SECRET_WORD = "zebra-canary-7731"  # appears only in request bodies


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def above_debug(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno > logging.DEBUG]


def assert_no_body_logged(caplog: pytest.LogCaptureFixture) -> None:
    for r in above_debug(caplog):
        text = r.getMessage() + (str(r.exc_info) if r.exc_info else "")
        assert SECRET_WORD not in text, f"a request body was logged at {r.levelname}: {text}"
        assert r.exc_info is None, f"a traceback was logged: {text}"


async def test_unsigned_bodies_are_refused_unparsed_and_unlogged(
    h: Harness, logs: pytest.LogCaptureFixture
) -> None:
    body = json.dumps({"type": "event_callback", "event": {"text": SECRET_WORD * 1000}})
    for _ in range(20):
        status, _ = await h.post(body, "application/json", {})
        assert status == 401
    bad = sign(body, secret="not-the-secret")
    assert (await h.post(body, "application/json", bad))[0] == 401
    stale = sign(body, timestamp=1)
    assert (await h.post(body, "application/json", stale))[0] == 401
    odd = {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=00"}
    assert (await h.post(body, "application/json", odd))[0] == 401  # not a 500
    assert_no_body_logged(logs)
    refusals = [r for r in above_debug(logs) if "refused" in r.getMessage()]
    assert len(refusals) == 1  # one line a minute, not one per request
    assert await h.turns() == []


async def test_unsigned_malformed_json_is_401_and_signed_malformed_is_400(
    h: Harness, logs: pytest.LogCaptureFixture
) -> None:
    broken = '{"type": "event_callback", "event": ' + SECRET_WORD
    assert (await h.post(broken, "application/json", {}))[0] == 401
    assert (await h.post(broken, "application/json", sign(broken)))[0] == 400
    not_object = json.dumps([SECRET_WORD])
    assert (await h.post(not_object, "application/json", sign(not_object)))[0] == 400
    bad_form = "payload=" + "%7B" + SECRET_WORD
    assert (await h.post(bad_form, "application/x-www-form-urlencoded",
                         sign(bad_form)))[0] == 400  # fmt: skip
    binary = b"\xff\xfe" + SECRET_WORD.encode()
    async with h.http.post(
        h.url, data=binary, headers={"Content-Type": "application/json",
                                     **sign(binary.decode("latin-1"))}
    ) as r:
        assert r.status in (400, 401)
    assert_no_body_logged(logs)


async def test_oversized_bodies_are_refused_before_reading(
    h: Harness, logs: pytest.LogCaptureFixture
) -> None:
    big = json.dumps({"text": SECRET_WORD + "x" * MAX_BODY_BYTES})
    assert (await h.post(big, "application/json", sign(big)))[0] == 413

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked transfer
        for _ in range(40):
            yield b"x" * 65536

    async with h.http.post(h.url, data=chunks(), headers={"Content-Type": "application/json"}) as r:
        assert r.status == 413
    assert_no_body_logged(logs)


async def test_signed_events_still_work_and_bolt_never_logs_bodies(
    h: Harness, logs: pytest.LogCaptureFixture
) -> None:
    assert await h.event(mention(f"<@UBOT> {SECRET_WORD}")) == 200
    # an event type nobody listens to: bolt warns "Unhandled request (<body>)"
    body = json.dumps({"type": "event_callback", "team_id": "T0TEAM", "event_id": "EvX",
                       "event": {"type": "reaction_added", "reaction": SECRET_WORD}})
    assert (await h.post(body, "application/json", sign(body)))[0] in (200, 404)
    await h.settle()
    assert [t.role for t in await h.turns(KEY)] == ["user", "assistant"]
    for r in above_debug(logs):
        assert SECRET_WORD not in r.getMessage(), r.getMessage()


async def test_a_signed_request_is_verified_once_before_bolt_parses_it(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate's check is the only one: bolt's own, which runs after bolt parsed the body
    into its request, is off, and the event is still answered."""
    checks: list[bytes] = []
    is_valid = SignatureVerifier.is_valid

    def counted(self: SignatureVerifier, body: str | bytes, timestamp: str | None,
                signature: str | None) -> bool:
        checks.append(body if isinstance(body, bytes) else body.encode())
        return is_valid(self, body, timestamp, signature)

    monkeypatch.setattr(SignatureVerifier, "is_valid", counted)
    assert await h.event(mention("<@UBOT> once")) == 200
    await h.settle()
    assert len(checks) == 1 and b"once" in checks[0]
    assert [t.role for t in await h.turns(KEY)] == ["user", "assistant"]


async def test_logged_user_text_cannot_forge_a_line(
    h: Harness, logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    forged = "Ev1\n2026-01-01 00:00:00 ERROR bot: admin password reset"
    event = mention(f"<@UBOT> hi {SECRET_WORD}")
    event["channel"] = "C1"
    body = json.dumps({"type": "event_callback", "team_id": "T0TEAM", "event_id": forged,
                       "event": {"type": "reaction_added", "reaction": forged}})
    await h.post(body, "application/json", sign(body))
    await h.settle()
    for r in logs.records:
        assert "\n" not in r.getMessage() or r.name.startswith("aiohttp"), r.getMessage()
    assert escape("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
    assert escape("x" * 500, 10) == "x" * 10 + "…"
