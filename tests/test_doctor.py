"""``gistbot doctor`` (issue 15): every secret form masked (passwords in a URL's user info
and in its query string, tokens), and a failure when the endpoint does not serve
``MODEL_NAME``. Against the loopback OpenAI fake (its ``GET /models``) and a closed port.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.doctor import doctor
from bot.ops.logs import scrub
from bot.settings import load_settings
from bot.settings.redact import mask_url, url_secrets
from tests.fakes.openai_server import FakeOpenAI, default_responder

DB_PASSWORD = "pg-user-info-secret-1"
QUERY_PASSWORD = "pg-query-secret-2"
SSL_PASSWORD = "pg-ssl-secret-3"
API_KEY_PARAM = "endpoint-query-key-4"
ENDPOINT_PASSWORD = "endpoint-basic-pass-5"
TOKEN = "xoxb-1234567890-abcdefghijkl"
ALL = [DB_PASSWORD, QUERY_PASSWORD, SSL_PASSWORD, API_KEY_PARAM, ENDPOINT_PASSWORD, TOKEN]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://gist:s3cr%40t@db.example:5432/chat?sslmode=require&password=abc#s1",
         "postgresql://gist:***@db.example:5432/chat?sslmode=require&password=***#s1"),
        ("postgresql://db.example/chat?user=gist&password=abc",
         "postgresql://db.example/chat?user=gist&password=***"),
        ("postgres://:onlypass@h/db", "postgres://:***@h/db"),
        ("https://proxy.example/v1?api_key=k&x-access-token=t&model=m",
         "https://proxy.example/v1?api_key=***&x-access-token=***&model=m"),
        ("sqlite:///var/lib/gistbot.db", "sqlite:///var/lib/gistbot.db"),
        ("postgresql://gist@h/db", "postgresql://gist@h/db"),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_url_secrets_are_scrubbed_as_written_and_decoded() -> None:
    url = "postgresql://gist:s3cr%40t-long@h/db?password=p%26ss-word"
    found = url_secrets(url)
    assert {"s3cr%40t-long", "s3cr@t-long", "p&ss-word"} <= set(found)
    assert scrub(f"failed for {url} (s3cr@t-long)", found).count("***") >= 2


async def test_doctor_masks_passwords_in_urls_and_tokens(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake:
        base = fake.base_url.replace("://", f"://bot:{ENDPOINT_PASSWORD}@")
        settings = load_settings(
            {
                "DATABASE_URL": f"postgresql://gist:{DB_PASSWORD}@127.0.0.1:9/test"
                f"?password={QUERY_PASSWORD}&sslpassword={SSL_PASSWORD}&connect_timeout=2",
                "OPENAI_BASE_URL": f"{base}?api_key={API_KEY_PARAM}",
                "MODEL_NAME": "gpt-test",
                "SUMMARY_MODEL_NAME": "gpt-test-mini",
                "SLACK_BOT_TOKEN": TOKEN,
                "SLACK_APP_TOKEN": "xapp-1-A0-1234567890-abcdef",
                "LLM_MAX_RETRIES": "0",
            },
            env_file=None,
        )
        out = io.StringIO()
        status = await doctor(settings, out)
    report = out.getvalue()
    assert [s for s in ALL if s in report] == []
    secrets = settings.secrets()  # what every log line is scrubbed of (bot.ops.logs.SecretFilter)
    assert {DB_PASSWORD, QUERY_PASSWORD, SSL_PASSWORD, API_KEY_PARAM, ENDPOINT_PASSWORD} <= set(
        secrets
    )
    assert "postgresql://gist:***@127.0.0.1:9/test?password=***&sslpassword=***" in report
    assert "database   FAILED" in report and status == 1  # nothing listens on port 9
    assert "xox…kl" in report


async def test_doctor_fails_when_the_model_is_not_served(tmp_path: Path) -> None:
    async with FakeOpenAI(models=("llama3.2:1b", "qwen2.5:0.5b")) as fake:
        settings = load_settings(
            {
                "DATABASE_URL": f"sqlite:///{tmp_path}/d.db",
                "OPENAI_BASE_URL": fake.base_url,
                "MODEL_NAME": "llama3.2:3b",
                "LLM_MAX_RETRIES": "0",
            },
            env_file=None,
        )
        out = io.StringIO()
        status = await doctor(settings, out)
    report = out.getvalue()
    assert status == 1, report
    assert "All checks passed" not in report
    [line] = [ln for ln in report.splitlines() if ln.strip().startswith("llm")]
    assert "FAILED" in line and "MODEL_NAME=llama3.2:3b" in line
    assert "llama3.2:1b" in line  # what it serves, to pick from
    assert "database   ok" in report


async def test_doctor_passes_when_both_models_are_served(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=default_responder) as fake:
        settings = load_settings(
            {
                "DATABASE_URL": f"sqlite:///{tmp_path}/d.db",
                "OPENAI_BASE_URL": fake.base_url,
                "MODEL_NAME": "gpt-test",
                "SUMMARY_MODEL_NAME": "gpt-test-mini",
            },
            env_file=None,
        )
        out = io.StringIO()
        assert await doctor(settings, out) == 0, out.getvalue()
    assert "All checks passed" in out.getvalue()


async def test_the_verdict_comes_first_and_the_configuration_last(tmp_path: Path) -> None:
    settings = load_settings(
        {"DATABASE_URL": f"sqlite:///{tmp_path}/d.db",
         "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "LLM_MAX_RETRIES": "0"},
        env_file=None,
    )
    out = io.StringIO()
    assert await doctor(settings, out) == 1
    lines = out.getvalue().splitlines()
    assert lines[0] == "gistbot doctor: 1 check failed:"
    assert lines[1].startswith("  llm        FAILED: LLMUnavailable: cannot reach")
    assert "check OPENAI_BASE_URL" in lines[1]  # the fix, on the same line
    assert "gistbot doctor" not in "\n".join(lines[1:])  # no advice to run what is running
    assert lines.index("Configuration:") > max(i for i, ln in enumerate(lines) if "ok:" in ln)
    assert not (tmp_path / "d.db").exists()  # a check reads; it creates no database


async def test_one_served_model_is_one_model(tmp_path: Path) -> None:
    async with FakeOpenAI(models=("gpt-test",), responder=default_responder) as fake:
        settings = load_settings(
            {"DATABASE_URL": f"sqlite:///{tmp_path}/d.db", "OPENAI_BASE_URL": fake.base_url,
             "MODEL_NAME": "gpt-test"},
            env_file=None,
        )
        out = io.StringIO()
        assert await doctor(settings, out) == 0, out.getvalue()
    assert out.getvalue().startswith("gistbot doctor: All checks passed.\n")
    assert "reachable, 1 model, using gpt-test; a tiny completion took " in out.getvalue()


async def test_without_a_token_it_does_not_promise_a_console(tmp_path: Path) -> None:
    # `gistbot run` with no token and no terminal (a container) exits 2; the doctor, run in
    # that container, must not say the console would start.
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/d.db"}, env_file=None)
    out = io.StringIO()
    assert await doctor(settings, out) == 0, out.getvalue()
    line = next(ln for ln in out.getvalue().splitlines()
                if ln.startswith("Adapters that would start:"))
    assert line.startswith("Adapters that would start: none: no platform token set")
    assert "status 2" in line
