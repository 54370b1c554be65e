"""The Slack adapter's settings, checked."""

from __future__ import annotations

from dataclasses import dataclass

from bot.platform import ConfigError, Settings

__all__ = ["SlackOptions"]


@dataclass(frozen=True, slots=True)
class SlackOptions:
    """What the Slack adapter reads from ``Settings``, and nothing more."""

    bot_token: str
    app_token: str | None = None  # Socket Mode when set
    signing_secret: str | None = None  # HTTP mode: every request's signature is checked
    admin_user_ids: frozenset[str] = frozenset()  # may /reset and /forget besides admins
    stream_replies: bool = False
    stream_interval: float = 1.0  # seconds between updates of a streamed reply
    host: str = "127.0.0.1"  # HTTP mode
    port: int = 3000
    backfill_max_messages: int = 500  # per channel after downtime; 0 = no backfill

    @classmethod
    def from_settings(cls, settings: Settings) -> SlackOptions:
        """Read ``SLACK_*``, ``STREAM_REPLIES``, ``HOST`` and ``PORT``; ``ConfigError``
        names the fix."""
        if settings.slack_bot_token is None:
            raise ConfigError(
                "SLACK_BOT_TOKEN is not set; copy the Bot User OAuth Token (xoxb-…)")
        app_token, secret = settings.slack_app_token, settings.slack_signing_secret
        return cls(
            bot_token=settings.slack_bot_token.get_secret_value(),
            app_token=app_token.get_secret_value() if app_token is not None else None,
            signing_secret=secret.get_secret_value() if secret is not None else None,
            admin_user_ids=frozenset(settings.slack_admin_user_ids),
            stream_replies=settings.stream_replies,
            host=settings.host,
            port=settings.port,
            backfill_max_messages=settings.backfill_max_messages,
        )
