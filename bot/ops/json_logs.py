"""``LOG_FORMAT=json``: one JSON object per log line, for log collectors.

Each line has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``, plus —
while a message is being handled — ``channel`` (platform:workspace:channel) and
``request_id`` (the message id that started the work; ``bot.ops.observe.bind_request``), and
``exception`` when there is one. The secret filter runs before formatting, so the message
and the exception text are already scrubbed.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from bot.ops.observe import log_context

__all__ = ["JsonFormatter"]


class JsonFormatter(logging.Formatter):
    """Formats a record as a single-line JSON object."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        bound = log_context.get()
        if bound is not None:
            out["channel"], out["request_id"] = bound
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, ensure_ascii=False)
