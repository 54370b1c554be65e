"""The tools around channel settings: ``copy-db`` carries settings and their change log
(SQLite → PostgreSQL → SQLite, verified), ``export`` writes a channel's settings and
changes, ``doctor`` shows the model allowlist, the console's ``/config``, and the new
variables' checks."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.console_adapter import ConsoleChat
from bot.cli import main
from bot.errors import ConfigError
from bot.ops.dbtools import copy_db
from bot.settings import load_settings
from bot.stores import Storage
from bot.stores.settings import server_scope
from memory.models import ChannelKey
from memory.stores.sqlite.store import SqliteStore
from tests.harness.chat import ask
from tests.harness.postgres import fresh_schema
from tests.harness.store_contract import new_turn

KEY = ChannelKey("slack", "T1", "C1")


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_schema("gistbot_setcopy") as url:
        yield url


async def seed(path: Path) -> None:
    async with Storage.on(SqliteStore(path)) as storage:
        await storage.memory.record(new_turn(KEY, "m1", "hello"))
        store = storage.settings
        await store.put_setting(KEY, "persona", "Du bist ein Pirat. 🏴‍☠️", actor="Ana (U1)",
                                now=100.5)
        await store.put_setting(server_scope(KEY), "language", "German", actor="Bo (U2)",
                                now=101.0)
        await store.put_setting(KEY, "reply_mode", "all", actor="Ana (U1)", now=102.0)
        await store.put_setting(KEY, "reply_mode", None, actor="Ana (U1)", now=103.0)


async def test_copy_db_carries_settings_and_their_log(tmp_path: Path, pg_url: str) -> None:
    from memory.stores.postgres.store import PostgresStore

    await seed(tmp_path / "a.db")
    dsn, _, schema = pg_url.partition("#")
    async with Storage.on(SqliteStore(tmp_path / "a.db")) as a, \
            Storage.on(SqliteStore(tmp_path / "b.db")) as b:
        pg = Storage.on(PostgresStore(dsn, schema=schema, max_size=2))
        await pg.open()
        try:
            await copy_db(a, pg)
            await copy_db(pg, b)
            assert await pg.settings.all_settings() == await a.settings.all_settings()
        finally:
            await pg.close()
        settings, changes = await b.settings.all_settings()
        assert (settings, changes) == await a.settings.all_settings()
        assert [(s.name, s.value) for s in settings] == [
            ("language", "German"), ("persona", "Du bist ein Pirat. 🏴‍☠️")]
        assert [c.value for c in changes] == ["Du bist ein Pirat. 🏴‍☠️", "German", "all", None]


def env_file(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / ".env"
    path.write_text(f"DATABASE_URL=sqlite:///{tmp_path / 'a.db'}\n{extra}")
    return str(path)


def test_export_writes_the_channels_settings_and_changes(tmp_path: Path) -> None:
    asyncio.run(seed(tmp_path / "a.db"))
    out = tmp_path / "export.jsonl"
    assert main(["--env-file", env_file(tmp_path), "export", "--channel", "slack:T1:C1",
                 "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    settings = [(r["scope"], r["name"], r["value"]) for r in rows if r["type"] == "setting"]
    assert settings == [("server", "language", "German"),
                        ("channel", "persona", "Du bist ein Pirat. 🏴‍☠️")]
    changes = [(r["name"], r["value"], r["actor"]) for r in rows
               if r["type"] == "setting_change"]
    assert changes[0] == ("persona", "Du bist ein Pirat. 🏴‍☠️", "Ana (U1)")
    assert changes[-1] == ("reply_mode", None, "Ana (U1)")


def test_doctor_shows_the_allowlist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--env-file", env_file(tmp_path, "MODEL_NAME=m-small\n"), "doctor"]) == 0
    assert "Models /config may choose (ALLOWED_MODELS): m-small" in capsys.readouterr().out
    envf = env_file(tmp_path, "ALLOWED_MODELS=m-small, m-big\n")
    assert main(["--env-file", envf, "doctor"]) == 0
    assert "(ALLOWED_MODELS): m-small, m-big" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "value"), [
    ("DAILY_TOKENS_PER_USER", "-1"), ("DAILY_TOKENS_PER_SERVER", "lots")])
def test_bad_quota_variables_are_named(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({name: value})
    assert name in str(info.value)


async def test_console_config_is_the_operators(tmp_path: Path) -> None:
    from bot.app import Runtime

    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path / 'c.db'}"})
    out = io.StringIO()
    async with Runtime.open(settings) as rt:
        chat = ConsoleChat(rt.features, channel="general", user="op", stdin=io.StringIO(),
                           stdout=out)
        await chat.handle("/config set server reply_mode off")
        await chat.handle("/config set persona You answer in haiku.")
        await chat.handle("/config")
        await chat.handle("/config bogus")
        assert await ask(rt, chat_message(chat, "hello?")) is None  # off
    text = out.getvalue()
    assert "Set reply_mode for this server to off." in text
    assert "persona: You answer in haiku.  (channel)" in text
    assert "Set persona for this channel to You answer in haiku.\n" in text  # one period
    assert "reply_mode: off  (server)" in text
    assert "model: offline (no model configured; gpt-4o-mini once one is)" in text
    assert "I don't know /config bogus" in text


def chat_message(chat: ConsoleChat, text: str):  # type: ignore[no-untyped-def]
    import time

    from bot.messages import IncomingMessage

    return IncomingMessage(chat.key, "c1", chat.user, chat.user, text, time.time(),
                           mentions_bot=True, is_direct=True)
