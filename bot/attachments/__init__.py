"""Files and images people attach: fetched from the platform's own file hosts only, read
(text, PDF text, image size), bounded, and added to the message's stored turn.

- ``model``: what an adapter hands over (``Attachment``) and what reading gives back.
- ``fetch``: the capped, timed download from a ``FileSource`` (a platform's hosts and auth).
- ``sniff``, ``pdf``, ``images``: what the bytes are, and their text or size.
- ``render``: the lines that stand for each file in the turn.
- ``vision``: which models see images, their token cost, the image parts of a request.
- ``intake``: ``AttachmentIntake``, the service's side: start reading when a message is
  recorded, settle before its reply, edit the turn when the text arrives later.
"""

from bot.attachments.fetch import FileSource
from bot.attachments.model import Attachment, Reading

# ``AttachmentIntake`` is imported from ``bot.attachments.intake``: it needs
# ``bot.messages``, which needs ``Attachment`` from here.
__all__ = ["Attachment", "FileSource", "Reading"]
