"""From fetched bytes to a ``Reading``: parsed in a worker process under CPU, memory and
wall-clock limits (``bot.attachments.workers``), never in the bot's own process; an
image's ``Reading`` keeps its bytes for a vision model. Never raises for what a file
contains."""

from __future__ import annotations

from bot.attachments.model import Reading
from bot.attachments.workers import Extractor

__all__ = ["read_bytes"]


async def read_bytes(data: bytes, declared: str, extractor: Extractor) -> Reading:
    """What ``data`` is; ``declared`` is the content type its host gave (a hint only)."""
    if not data:
        return Reading("unreadable", reason="empty")
    return await extractor.read(data, declared)
