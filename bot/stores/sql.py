"""SQL written once for both backends: ``?`` placeholders, numbered for PostgreSQL."""

from __future__ import annotations

import itertools
import re

__all__ = ["numbered"]

_PLACEHOLDER = re.compile(r"\?")


def numbered(sql: str) -> str:
    """``sql`` with its ``?`` placeholders as ``$1``, ``$2`` … (asyncpg's style).

    Only for statements of this package, which hold no ``?`` inside string literals."""
    n = itertools.count(1)
    return _PLACEHOLDER.sub(lambda _: f"${next(n)}", sql)
