"""From fetched bytes to a ``Reading``: sniffed, then read as an image (size only), a PDF
(its text, in a worker thread under the time limit) or text; anything else is unreadable.
Never raises for what a file contains."""

from __future__ import annotations

import asyncio

from bot.attachments.images import image_size
from bot.attachments.model import Reading
from bot.attachments.pdf import pdf_text
from bot.attachments.sniff import decode_text, sniff
from bot.settings.sections import AttachmentSettings

__all__ = ["read_bytes"]


async def read_bytes(data: bytes, declared: str, limits: AttachmentSettings) -> Reading:
    """What ``data`` is; ``declared`` is the content type its host gave (a hint only)."""
    kind = sniff(data)
    if kind in ("png", "jpeg", "gif", "webp"):
        size = image_size(data)
        if size is None:
            return Reading("unreadable", reason="unreadable")
        mime, width, height = size
        return Reading("image", width=width, height=height, mime=mime, data=data)
    if kind == "pdf":
        job = asyncio.to_thread(pdf_text, data, max_chars=limits.attachment_max_chars,
                                pages=limits.pdf_pages)
        try:
            text = await asyncio.wait_for(job, limits.attachment_timeout)
        except TimeoutError:
            return Reading("unreadable", reason="unreadable (took too long)")
        if text is None:
            return Reading("unreadable", reason="unreadable")
        if not text.strip():
            return Reading("unreadable", reason="no text (a scan?)")
        return Reading("text", text=text)
    if kind == "binary":
        return Reading("unreadable", reason="unreadable (not text)")
    text = decode_text(data, declared)
    if text is None:
        return Reading("unreadable", reason="unreadable (not text)")
    if not text.strip():
        return Reading("unreadable", reason="empty")
    return Reading("text", text=text)
