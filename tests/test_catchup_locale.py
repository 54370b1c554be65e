"""``/catchup 2/12`` reads the date the way the person asking writes dates, on every
platform: Discord's interaction locale, Slack's user locale (``users.info`` with
``include_locale``), the console's ``LC_ALL``/``LC_TIME``/``LANG``. Day first for ``de``,
month first for ``en-US``; the heading shows which day was read."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from adapters.console_adapter import ConsoleChat
from bot.app import Runtime
from bot.settings import load_settings
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.harness.discord import W, followup_to, make_settings, running
from tests.harness.slack import Harness


def read_as(text: str) -> str:
    """Which reading a catch-up heading shows (weekday and year depend on today)."""
    if " 02 Dec 00:00" in text.splitlines()[0]:
        return "day first"
    if " 12 Feb 00:00" in text.splitlines()[0]:
        return "month first"
    raise AssertionError(text)


async def test_discord_reads_dates_in_the_interaction_locale(
    tmp_path: Path, discord_fake: FakeDiscord, discord_llm: FakeOpenAI
) -> None:
    async with running(make_settings(tmp_path, discord_llm)) as (_rt, _, _watch):
        read = {}
        for locale in ("de", "en-US", "en-GB"):
            inter = await discord_fake.interaction("catchup", invoker=W.bob,
                                                   channel_id=W.general,
                                                   options={"since": "2/12"}, locale=locale)
            read[locale] = read_as((await followup_to(discord_fake, inter)).json["content"])
    assert read == {"de": "day first", "en-US": "month first", "en-GB": "day first"}


async def test_slack_reads_dates_in_the_users_locale(h: Harness) -> None:
    h.fake.add_user("U4", "Dora", locale="de-DE")
    read = {}
    for user in ("U4", "U2"):  # U2 is en-US
        await h.command("/catchup", user=user, text="2/12")
        [call] = await h.fake.wait_for("response_url:catchup")
        h.fake.calls.clear()
        read[user] = read_as(call.params["text"])
    assert read == {"U4": "day first", "U2": "month first"}


@pytest.mark.parametrize(("env", "reading"), [
    ({"LANG": "de_DE.UTF-8"}, "day first"),
    ({"LANG": "de_DE.UTF-8", "LC_TIME": "en_US.UTF-8"}, "month first"),
    ({"LC_ALL": "en_GB.UTF-8", "LANG": "en_US.UTF-8"}, "day first"),
])
async def test_the_console_reads_dates_in_the_terminals_locale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], reading: str
) -> None:
    for name in ("LC_ALL", "LC_TIME", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/c.db"}, env_file=None)
    async with Runtime.open(settings) as rt:
        out = io.StringIO()
        chat = ConsoleChat(rt.features, channel="ops", user="erin", stdin=io.StringIO(),
                           stdout=out)
        await chat.handle("/catchup 2/12")
        text = out.getvalue()
    assert read_as(text[text.index("**Catch-up**"):]) == reading
