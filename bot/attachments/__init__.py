"""Files and images people attach: fetched from the platform's own file hosts only, read
(text, PDF text, image size), bounded, and added to the message's stored turn.

- ``model``: what reading gives back (what an adapter hands over, ``Attachment``, is a
  plain value of ``bot.messages``).
- ``fetch``: the capped, timed download from a ``FileSource`` (a platform's hosts and auth).
- ``sniff``, ``pdf``, ``images``, ``extract``: what the bytes are, and their text or size.
- ``worker``, ``workers``, ``read``: that parsing, only ever in worker processes with CPU,
  memory and wall-clock limits (``Extractor``).
- ``render``: the lines that stand for each file in the turn, text fenced so it cannot speak.
- ``vision``: which models see images, their token cost, the image parts of a request.
- ``refusal``: images the model endpoint refused, marked so they are never sent again.
- ``describe``: an image's one-line description, by a vision model.
- ``intake``: ``AttachmentIntake``, the service's side: start reading when a message is
  recorded, settle before its reply, edit the turn when the text arrives later.
"""

from bot.attachments.fetch import FileSource
from bot.attachments.model import Reading

__all__ = ["FileSource", "Reading"]
