"""Platforms are found through the ``gistbot.platforms`` entry points of installed
distributions (``bot.plugins``), so ``bot/`` starts the adapters without importing them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.access import AccessRules, Verdict
from bot.admin.metrics import Metrics
from bot.channels.quota import Quota
from bot.conversation.rate_limit import RateLimiter
from bot.errors import ConfigError
from bot.messages import IncomingMessage
from bot.missed.owed import OwedReplies
from bot.plugins import (
    GROUP,
    Platform,
    configured_platforms,
    is_direct,
    is_trusted,
    load_platform,
    platform_names,
)
from bot.settings import load_settings
from memory.models import ChannelKey
from tests.fakes.openai_server import FakeOpenAI, default_responder
from tests.harness.service import runtime


def test_the_installed_package_names_its_three_platforms() -> None:
    console, discord, slack = (load_platform(n) for n in ("console", "discord", "slack"))
    assert [console.name, discord.name, slack.name] == ["console", "discord", "slack"]
    assert console.extra is None  # the terminal chat needs nothing optional
    assert discord.extra is not None and discord.extra.entry == "adapters.discord.launch"
    assert slack.extra is not None and slack.extra.entry == "adapters.slack.launch"
    assert discord.invite_url is not None and slack.invite_url is None
    assert "client_id=123456789012345678" in discord.invite_url("123456789012345678")


def test_a_platform_without_an_entry_point_is_a_clear_configuration_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_platform("irc")
    text = str(caught.value)
    assert "no platform 'irc' is installed" in text
    assert "'gistbot.platforms' entry points" in text and "pip install -e ." in text


def distribution(root: Path, module: str, entries: dict[str, str]) -> None:
    """A distribution installed under ``root``: its module and its entry points."""
    (root / f"{module}.py").write_text(
        "from bot.plugins import Platform\n\n\n"
        "async def serve(launch):\n    return 7\n\n\n"
        f"PLATFORM = Platform({module!r}, serve)\nNOT_A_PLATFORM = object()\n",
        encoding="utf-8")
    info = root / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n",
                                   encoding="utf-8")
    lines = [f"[{GROUP}]", *(f"{name} = {value}" for name, value in entries.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


async def test_another_distribution_adds_a_platform_by_its_metadata_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    distribution(tmp_path, "gistbot_matrix", {"matrix": "gistbot_matrix:PLATFORM",
                                              "broken": "gistbot_matrix:NOT_A_PLATFORM"})
    monkeypatch.syspath_prepend(str(tmp_path))
    platform = load_platform("matrix")
    assert isinstance(platform, Platform) and platform.name == "gistbot_matrix"
    assert await platform.serve(None) == 7  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"gistbot\.platforms:broken .* is not a Platform"):
        load_platform("broken")


MATRIX = '''from bot.plugins import Platform


async def serve(launch):
    return 0


PLATFORM = Platform("matrix", serve, configured=lambda settings: True,
                    is_direct=lambda key: key.channel.startswith("!dm"))
'''


@pytest.fixture
def fresh_platforms() -> Iterator[None]:
    """The installed platforms read anew, before and after (``platform_names`` keeps what
    it read once a process)."""
    platform_names.cache_clear()
    yield
    platform_names.cache_clear()


@pytest.mark.usefixtures("fresh_platforms")
def test_a_new_platform_is_configured_labelled_and_asked_by_its_entry_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The core keeps no list of platforms: an installed one is in the configured list when
    its entry says so, has its own metrics label, and says which of its keys are direct."""
    distribution(tmp_path, "gistbot_matrix_rules", {"matrix": "gistbot_matrix_rules:PLATFORM"})
    (tmp_path / "gistbot_matrix_rules.py").write_text(MATRIX, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert platform_names() == ("console", "discord", "matrix", "slack")
    assert configured_platforms(load_settings({"DISCORD_TOKEN": "abc.def.ghi"})) == [
        "discord", "matrix"]
    labels = Metrics(platforms=platform_names())
    assert labels.platform_label("matrix") == "matrix" and labels.platform_label("irc") == "other"
    assert is_direct(ChannelKey("matrix", "example.org", "!dm:alice"))
    assert not is_direct(ChannelKey("matrix", "example.org", "!room:general"))


KIOSK = '''from bot.plugins import Platform


async def serve(launch):
    return 0


PLATFORM = Platform("kiosk", serve, trusted=True)
'''


@pytest.mark.usefixtures("fresh_platforms")
def test_a_platform_that_says_its_author_is_the_operator_is_trusted_by_that_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trust is the platform's word, not its name: on a new platform whose entry says its
    author is the operator at their terminal, the lists refuse nobody, no bill is opened,
    no rate limit applies and no reply is owed; on one that does not say so, all apply."""
    distribution(tmp_path, "gistbot_kiosk", {"kiosk": "gistbot_kiosk:PLATFORM",
                                             "matrix": "gistbot_matrix_plain:PLATFORM"})
    (tmp_path / "gistbot_kiosk.py").write_text(KIOSK, encoding="utf-8")
    (tmp_path / "gistbot_matrix_plain.py").write_text(MATRIX, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    access = AccessRules(load_settings({"ALLOWED_USERS": "7", "ALLOWED_CHANNELS": "500"},
                                       env_file=None).access)
    quota, limiter = Quota(object()), RateLimiter(1, lambda: 0.0)  # type: ignore[arg-type]
    owed = OwedReplies(object())  # type: ignore[arg-type]
    for platform, trusted in (("kiosk", True), ("matrix", False), ("irc", False)):
        key = ChannelKey(platform, "w", "room")
        message = IncomingMessage(key, "m1", "stranger", "Stranger", "hi", 0.0, mentions_bot=True)
        assert is_trusted(platform) is trusted
        assert (access.verdict(key, "stranger", None, direct=False) is Verdict.ADMITTED) is trusted
        assert access.keeps_out(key) is not trusted
        assert (quota.bill(key, "reply", "stranger") is None) is trusted
        assert [limiter.allow(platform, "stranger") for _ in range(2)] == [True, trusted]
        assert (owed.due(message) is None) is trusted
    assert is_trusted("console") and not is_trusted("slack") and not is_trusted("discord")


@pytest.mark.usefixtures("fresh_platforms")
def test_the_installed_platforms_say_which_keys_are_direct_messages() -> None:
    assert platform_names() == ("console", "discord", "slack")
    assert configured_platforms(load_settings({})) == []  # the console starts instead
    assert is_direct(ChannelKey("slack", "T1", "D0DM"))
    assert not is_direct(ChannelKey("slack", "T1", "C0GENERAL"))
    assert is_direct(ChannelKey("discord", "dm", "600"))
    assert not is_direct(ChannelKey("discord", "4242", "600"))
    assert not is_direct(ChannelKey("console", "local", "general"))
    assert not is_direct(ChannelKey("irc", "dm", "x"))  # not installed: no rule applies


async def test_a_digest_in_a_direct_message_is_billed_to_nobody(tmp_path: Path) -> None:
    """Billed without a message in hand (a digest), a key's kind comes from its platform:
    in a Slack or Discord DM nobody pays, in a channel the server does."""
    async with FakeOpenAI(responder=default_responder) as fake, runtime(tmp_path, fake) as rt:
        quota = rt.features.quota
        for key in (ChannelKey("slack", "T1", "D0DM"), ChannelKey("discord", "dm", "600")):
            assert quota.bill(key, "digest") is None, key
        for key in (ChannelKey("slack", "T1", "C0GEN"), ChannelKey("discord", "4242", "600")):
            assert quota.bill(key, "digest") is not None, key
