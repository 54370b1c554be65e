"""PostgreSQL reads for ``memory.catchup_store.CatchupStore``: turns by the time they were
sent and a person's last message (index ``turns_channel_sent``)."""

from __future__ import annotations

from typing import Any

from memory.models import ChannelKey, Turn
from memory.stores.common import TurnRow, columns

__all__ = ["LAST_TURN_BY", "TURNS_BETWEEN", "turn_of"]

_T_COLS = columns(TurnRow._fields, "t.")
_CHANNEL = (
    "FROM channels c JOIN turns t ON t.channel_id = c.id "
    "WHERE c.platform = $1 AND c.workspace = $2 AND c.channel = $3 "
)

TURNS_BETWEEN = (
    f"SELECT {_T_COLS} {_CHANNEL} AND t.sent_at >= $4 AND t.sent_at < $5 "
    "ORDER BY t.sent_at, t.seq LIMIT $6"
)
LAST_TURN_BY = (
    f"SELECT {_T_COLS} {_CHANNEL} AND t.sent_at < $4 AND t.author_id = $5 AND t.role = 'user' "
    "ORDER BY t.sent_at DESC LIMIT 1"
)


def turn_of(key: ChannelKey, row: Any) -> Turn:
    """A turn from a row in ``TurnRow`` order."""
    return TurnRow(*row).turn(key)
