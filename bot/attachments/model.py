"""The plain values of attachment handling: a file as the platform announced it, the limits
that bound reading it, and what reading it gave."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["UNREADABLE_IMAGE", "Attachment", "Reading", "ReadingKind"]

ReadingKind = Literal["text", "image", "unreadable", "refused"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file shared with a message, from the platform's event (never from message text).

    ``placeholder`` is the note standing for it in the message's text (``[attachment:
    name]``), which its reading replaces in the stored turn; ``size`` is what the platform
    declared (None: unknown), checked before any download.
    """

    name: str
    url: str
    size: int | None = None
    content_type: str = ""
    placeholder: str = ""


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
