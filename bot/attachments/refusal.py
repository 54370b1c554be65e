"""Images the model endpoint refused. When a request that carries image parts is answered
with HTTP 400 (an image it cannot decode, a format it does not take), the same request
fails again however often it is sent, and the image rode along with every later reply in
its channel: one picture silenced the channel. So the caller retries once without the
parts, and each refused image's line in its stored turn becomes ``[image: name, W×H, could
not be read]``: the model is told, and no process sends that image again (the stored line
is checked before an image of an earlier message is sent, on SQLite and PostgreSQL
alike)."""

from __future__ import annotations

from collections.abc import Iterable

from bot.attachments.model import UNREADABLE_IMAGE

__all__ = ["is_refused", "mark_refused"]


def mark_refused(text: str, lines: Iterable[str]) -> str:
    """``text`` with each image line starting with one of ``lines`` (``[image: name, W×H``)
    ending in ``, could not be read]`` instead of its description."""
    for line in lines:
        at = text.find(line) if line else -1
        if at < 0:
            continue
        end = text.find("]", at + len(line))
        end = len(text) if end < 0 else end + 1
        text = f"{text[:at]}{line}, {UNREADABLE_IMAGE}]{text[end:]}"
    return text


def is_refused(text: str, line: str) -> bool:
    """Whether the image whose line starts with ``line`` is marked refused in ``text``."""
    return bool(line) and f"{line}, {UNREADABLE_IMAGE}]" in text
