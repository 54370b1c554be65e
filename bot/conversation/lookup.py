"""Ambiguous outcomes are looked up, not retried blind.

A platform call that changes what people see (a post, an edit, a delete) can end without
saying whether it took effect: the platform answered 5xx, the connection was reset, or no
answer came in time. An outlet says so by raising ``OutcomeUnknown`` instead of reporting a
failure. ``LookedUp`` wraps an outlet and is the one place that decides what happens next:

- a **post** is looked up by its outbox identity (``PostOutlet.find``: Slack reads the
  message metadata back; Discord's ``find`` has nothing to read, because posting again with
  the same enforced nonce returns the message created the first time) and posted again only
  when it is not there. A lookup that cannot read the platform (it raises
  ``OutcomeUnknown`` too) tells nothing: the next attempt looks again instead of posting,
  since a post that took effect would otherwise show twice;
- an **edit** (the same text into the same message) and a **delete** (a message already
  gone counts as deleted) are repeated: doing either twice shows the same as once.

Each is tried at most ``ATTEMPTS`` times; then it counts as failed (logged). A refusal (the
platform said no: a 4xx, a 429 after the client's waits) is not ambiguous and is not
repeated. The platform clients' own retries of these calls are off or behave the same way
(``adapters.slack.web``; discord.py retries a create with the same nonce).
"""

from __future__ import annotations

import logging

from bot.conversation.posts import Post, PostOutlet
from bot.errors import OutcomeUnknown
from memory.models import ChannelKey

__all__ = ["ATTEMPTS", "LookedUp", "looked_up"]

log = logging.getLogger(__name__)
ATTEMPTS = 3


class LookedUp:
    """A ``PostOutlet`` whose calls of unknown outcome are looked up before they are
    repeated (see the module docstring)."""

    def __init__(self, outlet: PostOutlet) -> None:
        self.outlet = outlet

    async def post(self, post: Post) -> str | None:
        """Post it once: after an unknown outcome, find it before posting again (and while
        the lookup cannot tell, look again rather than post)."""
        unsure = False  # a post may have taken effect and no lookup has told yet
        for attempt in range(1, ATTEMPTS + 1):
            if not unsure:
                try:
                    return await self.outlet.post(post)
                except OutcomeUnknown as e:
                    log.warning("posting %s: outcome unknown (%s, attempt %d); looking it up",
                                post.outbox_id, e, attempt)
            try:
                found = await self.outlet.find(post)
            except OutcomeUnknown as e:
                log.warning("looking %s up failed (%s, attempt %d); not posting it blind",
                            post.outbox_id, e, attempt)
                unsure = True
                continue
            unsure = False
            if found is not None:
                log.info("found %s posted after all; not posting it again", post.outbox_id)
                return found
        log.error("gave up posting %s after %d attempts of unknown outcome", post.outbox_id,
                  ATTEMPTS)
        return None

    async def edit(self, post: Post, message_id: str) -> bool:
        """Edit; after an unknown outcome, edit again (the same text: idempotent)."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self.outlet.edit(post, message_id)
            except OutcomeUnknown as e:
                log.warning("editing %s into %s: outcome unknown (%s, attempt %d)",
                            post.outbox_id, message_id, e, attempt)
        log.error("gave up editing %s into %s", post.outbox_id, message_id)
        return False

    async def delete(self, key: ChannelKey, message_id: str) -> bool:
        """Delete; after an unknown outcome, delete again (gone already counts as done)."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self.outlet.delete(key, message_id)
            except OutcomeUnknown as e:
                log.warning("deleting %s in %s: outcome unknown (%s, attempt %d)",
                            message_id, key, e, attempt)
        log.error("gave up deleting %s in %s", message_id, key)
        return False

    async def find(self, post: Post) -> str | None:
        """The outlet's own lookup (raises ``OutcomeUnknown`` when it cannot tell)."""
        return await self.outlet.find(post)


def looked_up(outlet: PostOutlet) -> LookedUp:
    """``outlet`` under the lookup rule (itself when it already is)."""
    return outlet if isinstance(outlet, LookedUp) else LookedUp(outlet)
