"""Logging set-up with secret scrubbing.

Every configured token and key is replaced by ``***`` in every log record, whatever logger
or exception text carried it, so a stack trace from an SDK can never leak a credential.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

__all__ = ["SecretFilter", "scrub", "setup_logging"]


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret (six characters or longer) replaced by ``***``."""
    for secret in secrets:
        if len(secret) >= 6:
            text = text.replace(secret, "***")
    return text


class SecretFilter(logging.Filter):
    """Replaces each secret in the formatted message (and exception text) with ``***``."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if len(s) >= 6]

    def _scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        record.msg = self._scrub(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._scrub(record.exc_text)
        return True


def setup_logging(level: str, secrets: Sequence[str] = (), *, fmt: str = "text") -> None:
    """Log to stderr at ``level`` with secrets scrubbed from every handler's output;
    ``fmt="json"`` writes one JSON object per line (``bot.json_logs``)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if fmt == "json":
        from bot.json_logs import JsonFormatter

        handler.setFormatter(JsonFormatter())
    handler.addFilter(SecretFilter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "openai", "discord.gateway", "aiosqlite"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
