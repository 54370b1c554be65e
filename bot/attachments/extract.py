"""From a file's bytes to a ``Reading``, synchronously: sniffed, then read as an image (its
size, and its pixels decoded once to prove they are), a PDF (its text) or text; anything
else is unreadable. This is the part that parses what strangers send, so it runs only in a
worker process under CPU, memory and wall-clock limits (``bot.attachments.workers``),
never in the bot's own process. Never raises for what a file contains."""

from __future__ import annotations

import io
import warnings

from bot.attachments.images import FORMATS, image_size
from bot.attachments.model import Reading
from bot.attachments.pdf import pdf_text
from bot.attachments.sniff import decode_text, sniff

__all__ = ["extract", "pixels_decode"]


def pixels_decode(data: bytes) -> bool:
    """Whether the image ``data``'s pixels decode (its first frame): a file whose header and
    checksums are fine but whose pixels are not would be refused by a vision model."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=list(FORMATS)) as img:
                img.load()
    except (Exception, Image.DecompressionBombWarning):
        return False
    return True


def extract(data: bytes, declared: str, *, max_chars: int, pages: int,
            max_pixels: int) -> Reading:
    """What ``data`` is (``declared``: the host's content type, a hint only). An image's
    ``Reading`` carries no bytes: the caller keeps them. Pixels are decoded only for an
    image small enough to be sent to a model (``max_pixels``)."""
    kind = sniff(data)
    if kind in ("png", "jpeg", "gif", "webp"):
        size = image_size(data)
        if size is None:
            return Reading("unreadable", reason="unreadable")
        mime, width, height = size
        if width * height <= max_pixels and not pixels_decode(data):
            return Reading("unreadable", reason="unreadable")
        return Reading("image", width=width, height=height, mime=mime)
    if kind == "pdf":
        text = pdf_text(data, max_chars=max_chars, pages=pages)
        if text is None:
            return Reading("unreadable", reason="unreadable")
        if not text.strip():
            return Reading("unreadable", reason="no text (a scan?)")
        return Reading("text", text=text)
    if kind == "binary":
        return Reading("unreadable", reason="unreadable (not text)")
    decoded = decode_text(data, declared)
    if decoded is None:
        return Reading("unreadable", reason="unreadable (not text)")
    if not decoded.strip():
        return Reading("unreadable", reason="empty")
    return Reading("text", text=decoded)
