"""The admin server: health and readiness (each check provoked to fail), Prometheus metrics
from real traffic (model calls through the loopback OpenAI fake), bounded labels, JSON log
lines, its settings, and that nothing of the inspector is reachable when it is off."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import aiohttp
import pytest

from bot.admin.metrics import BoundedLabel, Metrics
from bot.admin.server import admin_server
from bot.app import Runtime
from bot.errors import ConfigError
from bot.ops.json_logs import JsonFormatter
from bot.ops.observe import bind_request, log_context
from bot.settings import load_settings
from memory.models import ChannelKey
from tests.fakes.openai_server import Error, FakeOpenAI, default_responder
from tests.harness.admin import TOKEN, admin, fill

KEY = ChannelKey("discord", "g1", "secret-channel-4242")


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as r:
        return r.status, await r.text()


async def test_healthz_and_readyz_answer_json(tmp_path: Path) -> None:
    async with admin(tmp_path) as a:
        status, body = await _get(f"{a.url}/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        status, body = await _get(f"{a.url}/readyz")
        ready = json.loads(body)
        assert status == 200 and ready["status"] == "ready"
        assert ready["checks"]["store"]["ok"] and ready["checks"]["model"]["ok"]


async def test_readyz_fails_when_the_store_does_not_answer(tmp_path: Path) -> None:
    async with admin(tmp_path) as a:
        await a.rt.store.close()
        status, body = await _get(f"{a.url}/readyz")
        assert status == 503
        store = json.loads(body)["checks"]["store"]
        assert not store["ok"] and "StoreError" in store["detail"]
        _, metrics = await _get(f"{a.url}/metrics")
        assert 'gistbot_store_errors_total{kind="StoreError"}' in metrics


async def test_readyz_waits_for_every_configured_platform(tmp_path: Path) -> None:
    async with admin(tmp_path, DISCORD_TOKEN="fake-discord-token-xyz") as a:
        status, body = await _get(f"{a.url}/readyz")
        assert status == 503
        assert json.loads(body)["checks"]["discord"] == {"ok": False,
                                                         "detail": "not connected yet"}
        a.rt.service.set_identity("discord", "42", "gistbot")  # what the adapter does on login
        status, body = await _get(f"{a.url}/readyz")
        assert status == 200, body


async def test_readyz_reports_a_failing_model_endpoint(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, admin(
        tmp_path, OPENAI_BASE_URL=fake.base_url, MODEL_NAME="gpt-test", LLM_MAX_RETRIES="0",
    ) as a:
        fake.push(Error(500, {"error": {"message": "down"}}))
        await fill(a.rt, KEY, 1, mention_every=1)
        status, body = await _get(f"{a.url}/readyz")
        model = json.loads(body)["checks"]["model"]
        assert status == 503 and not model["ok"] and "none succeeded" in model["detail"]
        await fill(a.rt, KEY, 1, start=1, mention_every=1)
        status, body = await _get(f"{a.url}/readyz")
        assert status == 200, body


async def test_metrics_count_real_traffic_without_channel_labels(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, admin(
        tmp_path, OPENAI_BASE_URL=fake.base_url, MODEL_NAME="gpt-test",
        SUMMARY_MODEL_NAME="gpt-test-mini", LLM_MAX_RETRIES="0",
    ) as a:
        await fill(a.rt, KEY, 10, mention_every=5)  # 2 replies, and enough for a compaction
        await a.rt.memory.wait_idle()
        status, text = await _get(f"{a.url}/metrics")
    assert status == 200
    lines = text.splitlines()

    def value(prefix: str) -> float:
        found = [ln for ln in lines if ln.startswith(prefix + " ") or (ln.startswith(prefix + "{")
                 and ln.split(" ")[0] == prefix)]
        assert found, f"{prefix} missing"
        return float(found[0].rsplit(" ", 1)[1])

    assert value('gistbot_model_calls_total{kind="reply",model="gpt-test",outcome="ok"}') == 2
    assert value('gistbot_model_tokens_total{kind="reply",model="gpt-test",type="prompt"}') > 0
    assert value('gistbot_turns_recorded_total{platform="discord",role="user"}') == 10
    assert value('gistbot_turns_recorded_total{platform="discord",role="assistant"}') == 2
    assert value('gistbot_reply_latency_seconds_count{platform="discord"}') == 2
    assert value('gistbot_recall_latency_seconds_count{platform="discord"}') == 2
    assert value('gistbot_compactions_total{outcome="committed"}') >= 1
    assert value('gistbot_compaction_pending_turns{platform="discord"}') >= 1
    assert value('gistbot_compaction_oldest_pending_seconds{platform="discord"}') >= 0
    assert value("gistbot_event_loop_lag_seconds") >= 0
    assert "secret-channel-4242" not in text and "g1" not in text  # no channel ids as labels


def test_free_label_values_are_capped() -> None:
    models = BoundedLabel(3)
    assert [models(f"m{i}") for i in range(5)] == ["m0", "m1", "m2", "other", "other"]
    assert models("m1") == "m1"
    metrics = Metrics()
    for i in range(100):
        metrics.store_error(f"Kind{i}")
    kinds = {s.labels["kind"] for f in metrics.registry.collect() for s in f.samples
             if s.name == "gistbot_store_errors_total"}
    assert len(kinds) == 33 and "other" in kinds


async def test_nothing_is_served_when_the_server_is_off(tmp_path: Path) -> None:
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/off.db"})
    async with Runtime.open(settings) as rt, admin_server(rt) as server:
        assert server is None  # no ADMIN_PORT: no listener at all


@pytest.mark.parametrize("path", ["/inspector/", "/inspector/login", "/inspector/channel?c=a:b:c"])
async def test_inspector_is_not_reachable_when_its_page_is_off(tmp_path: Path,
                                                               path: str) -> None:
    async with admin(tmp_path, ADMIN_INSPECTOR="false") as a:
        assert (await _get(f"{a.url}/healthz"))[0] == 200
        status, _ = await _get(a.url + path)
        assert status == 404
        async with aiohttp.ClientSession() as http, http.post(
            f"{a.url}/inspector/login", data={"token": TOKEN}) as r:
            assert r.status == 404


@pytest.mark.parametrize(("env", "needle"), [
    ({"ADMIN_INSPECTOR": "true", "ADMIN_PORT": "9464"}, "ADMIN_TOKEN"),
    ({"ADMIN_INSPECTOR": "true", "ADMIN_PORT": "9464", "ADMIN_TOKEN": "short"}, "16"),
    ({"ADMIN_INSPECTOR": "true", "ADMIN_TOKEN": TOKEN}, "ADMIN_PORT"),
    ({"ADMIN_PORT": "70000"}, "ADMIN_PORT"),
    ({"LOG_FORMAT": "xml"}, "LOG_FORMAT"),
    ({"SUMMARY_HISTORY": "-1"}, "SUMMARY_HISTORY"),
])
def test_bad_admin_settings_are_refused(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_settings(env, env_file=None)


def test_admin_token_is_a_scrubbed_secret() -> None:
    s = load_settings({"ADMIN_INSPECTOR": "true", "ADMIN_PORT": "1", "ADMIN_TOKEN": TOKEN},
                      env_file=None)
    assert TOKEN in s.secrets() and s.admin.admin_host == "127.0.0.1"


def test_json_log_lines_carry_channel_and_request_id() -> None:
    fmt = JsonFormatter()
    record = logging.LogRecord("gistbot", logging.INFO, __file__, 1, "hello %s", ("x",), None)
    token = log_context.set(None)
    try:
        assert "channel" not in json.loads(fmt.format(record))
        bind_request(KEY, "msg-77")
        line = json.loads(fmt.format(record))
    finally:
        log_context.reset(token)
    assert line["message"] == "hello x" and line["level"] == "INFO"
    assert line["channel"] == "discord:g1:secret-channel-4242" and line["request_id"] == "msg-77"


@pytest.mark.parametrize(("answer", "outcome"), [
    ("I'm sorry, but I cannot summarize this conversation.", "rejected"),
    (Error(500, {"error": {"message": "down"}}), "failed"),
])
async def test_failed_and_rejected_compactions_are_counted(
    tmp_path: Path, answer: object, outcome: str
) -> None:
    async with FakeOpenAI(responder=default_responder) as fake, admin(
        tmp_path, OPENAI_BASE_URL=fake.base_url, MODEL_NAME="gpt-test", LLM_MAX_RETRIES="0",
        MAX_HISTORY_MESSAGES="50", KEEP_RECENT_MESSAGES="4",
    ) as a:
        await fill(a.rt, KEY, 10)  # under the window: no background compaction
        fake.push(answer)  # type: ignore[arg-type]
        with pytest.raises(Exception):  # noqa: B017 - either error class is the point
            await a.rt.memory.compact_now(KEY, force=True)
        assert await a.rt.memory.compact_now(KEY, force=True)  # the next one commits
        _, text = await _get(f"{a.url}/metrics")
    assert f'gistbot_compactions_total{{outcome="{outcome}"}} 1.0' in text
    assert 'gistbot_compactions_total{outcome="committed"} 1.0' in text
    other = "failed" if outcome == "rejected" else "rejected"
    assert f'gistbot_compactions_total{{outcome="{other}"}}' not in text


async def test_summary_history_setting_bounds_the_store(tmp_path: Path) -> None:
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/h.db",
                              "SUMMARY_HISTORY": "2", "MAX_HISTORY_MESSAGES": "4",
                              "KEEP_RECENT_MESSAGES": "1"})
    async with Runtime.open(settings) as rt:
        for i in range(0, 30, 3):
            await fill(rt, KEY, 3, start=i)
            await rt.memory.wait_idle()
        assert rt.memory.compactions >= 3
        assert len(await rt.store.summary_history_of(KEY)) == 2
