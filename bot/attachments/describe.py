"""A short description of an image, written once by a vision model when the image is first
seen, so memory keeps what a screenshot showed ("what was in the screenshot Alice posted
on Monday?") after the image itself is gone. Charged to the server like a background
summary; a failure leaves the image's ``[image: name, W×H]`` line as it was. When the
endpoint refuses the request (400), it is asked once more without the image: only if that
is answered was the image what it refused (``LLMInputRejected`` for the caller to mark);
anything else (a 400 about a request field it does not take, no answer) leaves the line
alone."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.attachments.model import Reading
from bot.attachments.vision import ImagePart, image_tokens, with_images
from bot.errors import GistbotError, LLMBadResponse, LLMInputRejected
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
            if not await self._takes_without(key, messages):
                log.warning("the model endpoint refused a description request in %s and "
                            "was not shown to take it without the image; the image is not "
                            "marked (check SUMMARY_MODEL_PARAMS)", key)
                return None  # not shown to be the image's fault: its line stays as it is
            raise
        except GistbotError as e:  # over quota, or the model failed: the line stays as it is
            log.info("no description of an image in %s: %s", key, type(e).__name__)
            return None
        return one_line(done.text) or None

    async def _takes_without(self, key: ChannelKey, messages: list[ChatMessage]) -> bool:
        """Whether the endpoint answers the request without its image: only then was the
        image what it refused. Refused again (a request field it does not take), or no
        answer either way (over quota, down): the image is not blamed; were it at fault
        after all, the first reply that carries it is refused and marks it then."""
        try:
            with self.quota.paying(key, "compaction"):
                await self.llm.complete(messages, max_tokens=1, purpose="summary",
                                        model=self.model)
        except LLMBadResponse:  # answered (one token may be only reasoning): it took it
            return True
        except GistbotError:
            return False
        return True
