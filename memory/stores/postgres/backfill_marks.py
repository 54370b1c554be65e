"""Backfill marks on PostgreSQL (schema step 5): where a channel's backfill after downtime
started, until it has stored all it read (``adapters.backfill`` says why)."""

from __future__ import annotations

__all__ = ["BEGIN", "CLEAR", "END", "GET"]

_KEY = "platform = $1 AND workspace = $2 AND channel = $3"
# The CTE's insert is invisible to the outer SELECT (one snapshot): exactly one row comes
# back, the new mark or the one already set.
BEGIN = (
    "WITH ins AS (INSERT INTO backfill_marks (platform, workspace, channel, after_id, set_at) "
    "VALUES ($1, $2, $3, $4, extract(epoch FROM clock_timestamp())) "
    "ON CONFLICT (platform, workspace, channel) DO NOTHING RETURNING after_id) "
    f"SELECT after_id FROM ins UNION ALL SELECT after_id FROM backfill_marks WHERE {_KEY}"
)
END = f"DELETE FROM backfill_marks WHERE {_KEY} AND after_id = $4"
GET = f"SELECT after_id FROM backfill_marks WHERE {_KEY}"
CLEAR = f"DELETE FROM backfill_marks WHERE {_KEY}"  # /reset: forgotten is forgotten
