"""A short description of an image, written once by a vision model when the image is first
seen, so memory keeps what a screenshot showed ("what was in the screenshot Alice posted
on Monday?") after the image itself is gone. Charged to the server like a background
summary; a refusal or failure leaves the image's ``[image: name, W×H]`` line as it was."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.attachments.model import Reading
from bot.attachments.vision import ImagePart, image_tokens, with_images
from bot.errors import GistbotError, LLMInputRejected
from memory.completion import ChatMessage
from memory.models import ChannelKey

if TYPE_CHECKING:
    from bot.channels.quota import Quota
    from bot.llm.client import LLM

__all__ = ["DESCRIBE_PROMPT", "ImageDescriber", "one_line"]

log = logging.getLogger(__name__)
DESCRIBE_PROMPT = (
    "You describe an image someone shared in a group chat, for the chat's record. In one or "
    "two plain sentences say what it shows; copy any error message, code, number or name "
    "visible in it exactly. No preamble."
)
MAX_CHARS = 400


def one_line(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` on one line, without square brackets (it sits inside ``[image: …]``), cut
    to ``limit`` characters."""
    flat = " ".join(text.replace("[", "(").replace("]", ")").split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


class ImageDescriber:
    """Asks ``model`` (through ``llm``) for a description; ``quota`` meters the call."""

    def __init__(self, llm: LLM, quota: Quota, model: str, *, max_tokens: int = 150) -> None:
        self.llm, self.quota, self.model, self.max_tokens = llm, quota, model, max_tokens

    async def __call__(self, key: ChannelKey, image: Reading) -> str | None:
        """One line about ``image``, or None (over quota, the model failed or said nothing);
        ``LLMInputRejected`` when the endpoint refused the image itself."""
        detail = "high" if image_tokens(image.width, image.height) <= 1105 else "low"
        part = ImagePart(image.mime, image.data, detail, image_tokens(image.width, image.height,
                                                                      detail))
        messages: list[ChatMessage] = [{"role": "system", "content": DESCRIBE_PROMPT},
                                       {"role": "user", "content": "The image:"}]
        try:
            with self.quota.paying(key, "compaction"):
                done = await self.llm.complete(with_images(messages, {1: [part]}),
                                               max_tokens=self.max_tokens, purpose="summary",
                                               model=self.model)
        except LLMInputRejected:
            raise
        except GistbotError as e:  # over quota, or the model failed: the line stays as it is
            log.info("no description of an image in %s: %s", key, type(e).__name__)
            return None
        return one_line(done.text) or None
