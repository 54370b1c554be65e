"""The Slack adapter's settings (``Settings.slack``), checked and revealed where used."""

from __future__ import annotations

from bot.platform import ConfigError, Settings, SlackSettings

__all__ = ["bot_token", "checked", "reveal"]


def checked(settings: Settings) -> Settings:
    """``settings`` once ``SLACK_BOT_TOKEN`` is set; ``ConfigError`` names the fix."""
    bot_token(settings.slack)
    return settings


def bot_token(section: SlackSettings) -> str:
    """``SLACK_BOT_TOKEN``, revealed for the Web API client."""
    if section.slack_bot_token is None:
        raise ConfigError("SLACK_BOT_TOKEN is not set; copy the Bot User OAuth Token (xoxb-…)")
    return section.slack_bot_token.get_secret_value()


def reveal(secret: object) -> str | None:
    """A configured secret's value (``SLACK_APP_TOKEN``, ``SLACK_SIGNING_SECRET``), or None."""
    value = getattr(secret, "get_secret_value", None)
    return None if value is None else str(value())
