"""Platforms are found through the ``gistbot.platforms`` entry points of installed
distributions (``bot.plugins``), so ``bot/`` starts the adapters without importing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.plugins import GROUP, Platform, load_platform


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
