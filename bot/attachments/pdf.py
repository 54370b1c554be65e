"""PDF text with pypdf, bounded: at most ``pages`` pages and a little more than the
characters that will be kept; any failure of a malformed file (loops in its page tree,
broken streams, encryption) is an unreadable file, never an error."""

from __future__ import annotations

import io
import logging

__all__ = ["pdf_text"]

logging.getLogger("pypdf").setLevel(logging.ERROR)  # a broken file is noted, not logged


def pdf_text(data: bytes, *, max_chars: int, pages: int) -> str | None:
    """The text of the PDF ``data`` (pages separated by blank lines), cut a little past
    ``max_chars``; None when it cannot be read (a worker process runs it)."""
    from pypdf import PdfReader  # imported here: only a PDF needs it

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            return None
        out: list[str] = []
        size = 0
        for n, page in enumerate(reader.pages):
            if n >= pages or size > max_chars:
                break
            text = (page.extract_text() or "").strip()
            if text:
                out.append(text)
                size += len(text) + 2
        return "\n\n".join(out)
    except (Exception, RecursionError):  # pypdf raises many kinds on malformed files
        return None
