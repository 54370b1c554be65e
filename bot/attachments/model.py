"""The plain values of attachment handling: the limits that bound reading a file and what
reading it gave (the file as the platform announced it is ``bot.messages.Attachment``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["UNREADABLE_IMAGE", "Reading", "ReadingKind"]

ReadingKind = Literal["text", "image", "unreadable", "refused"]


@dataclass(frozen=True, slots=True)
class Reading:
    """What a file turned out to be. ``text`` for text and PDFs; ``width``/``height`` and
    the original ``data`` (``mime``) for an image; ``reason`` says why a file was not read
    (``refused``: not fetched; ``unreadable``: fetched but broken or not text), or for an
    image that the model endpoint refused, ``UNREADABLE_IMAGE``. ``name`` is the file's
    name as the platform gave it (set once the file is read)."""

    kind: ReadingKind
    text: str = ""
    width: int = 0
    height: int = 0
    mime: str = ""
    data: bytes = b""
    reason: str = ""
    name: str = ""


UNREADABLE_IMAGE = "could not be read"
"""What an image's line says once the model endpoint refused it (HTTP 400): it is never
sent again, and the model is told it could not be read."""
