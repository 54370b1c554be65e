"""Counts in sentences a person reads: "1 channel", "2 channels"."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` with ``noun`` in the number it takes (``nouns`` when not just ``noun + s``).

    The noun may be a phrase whose last word changes: ``plural(1, "kept identifier")``.
    """
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {nouns or noun + 's'}"
