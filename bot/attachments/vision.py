"""Images for models that see: which models accept them (``VISION``), what an image costs
(OpenAI's tile formula), and the request's last user message with image parts.

The tile formula (detail ``high``): the image is scaled to fit 2048×2048, then so its
shorter side is at most 768; each 512-pixel tile costs 170 tokens, plus 85 for the whole.
Detail ``low`` is 85 tokens whatever the size.

The images of the message being answered are paid for before the memory is read; images of
earlier messages (still held in memory, the newest few) only from what the memory left.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from bot.attachments.model import UNREADABLE_IMAGE, Reading
from bot.attachments.render import image_line
from memory.completion import ChatMessage

__all__ = ["ImagePart", "fit_images", "image_tokens", "sees_images", "with_images"]

FAMILIES = ("gpt-4o", "gpt-4.1", "chatgpt-4o")
LOW_TOKENS = 85


def sees_images(mode: str, model: str, extra: Collection[str] = ()) -> bool:
    """Whether ``model`` gets images: ``on``/``off``, or ``auto`` (the gpt-4o and gpt-4.1
    families, with a provider prefix such as ``openai/`` or not, and ``extra`` names)."""
    if mode in ("on", "off"):
        return mode == "on"
    name = model.strip().lower()
    if name in {m.strip().lower() for m in extra}:
        return True
    base = name.rsplit("/", 1)[-1]
    return any(base == f or base.startswith(f + "-") for f in FAMILIES)


def image_tokens(width: int, height: int, detail: str = "high") -> int:
    """What an image costs in the prompt, by OpenAI's formula."""
    if detail == "low":
        return LOW_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    return LOW_TOKENS + 170 * math.ceil(w / 512) * math.ceil(h / 512)


@dataclass(frozen=True, slots=True)
class ImagePart:
    """One image as sent, with the detail level its counted cost assumed; ``line`` is the
    start of its line in the turn (``[image: name, W×H``), by which a refused image is
    marked (``bot.attachments.refusal``)."""

    mime: str
    data: bytes
    detail: str
    tokens: int
    line: str = ""


def fit_images(images: Sequence[Reading], budget: int, max_pixels: int) -> list[ImagePart]:
    """The images that fit in ``budget`` tokens, in order: at ``high`` detail, else at
    ``low``, else left out (its ``[image: …]`` line is still in the text). An image the
    model endpoint refused is never sent again."""
    parts: list[ImagePart] = []
    left = budget
    for img in images:
        if (img.kind != "image" or img.width * img.height > max_pixels
                or img.reason == UNREADABLE_IMAGE):
            continue
        for detail in ("high", "low"):
            cost = image_tokens(img.width, img.height, detail)
            if cost <= left:
                parts.append(ImagePart(img.mime, img.data, detail, cost,
                                       image_line(img.name, img.width, img.height)))
                left -= cost
                break
    return parts


def with_images(messages: list[ChatMessage], images: Mapping[int, Sequence[ImagePart]]
                ) -> list[ChatMessage]:
    """``messages`` with ``images[i]`` added to message ``i`` as ``image_url`` parts (base64
    data URLs: the platform's own URLs need its token or expire); only user messages get
    images, and a message with none is left as it is."""
    out = list(messages)
    for at, parts in images.items():
        if not parts or not 0 <= at < len(out) or out[at]["role"] != "user":
            continue
        content: list[dict[str, Any]] = [{"type": "text", "text": out[at]["content"]}]
        for p in parts:
            url = f"data:{p.mime};base64,{base64.b64encode(p.data).decode('ascii')}"
            content.append({"type": "image_url", "image_url": {"url": url, "detail": p.detail}})
        out[at] = cast(ChatMessage, {"role": "user", "content": content})
    return out
