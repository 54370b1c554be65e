"""Who is who in a Slack workspace: the bot (``auth.test``) and people (``users.info``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.transport import escape

__all__ = ["BotIdentity", "UserDirectory", "display_name"]

log = logging.getLogger(__name__)
Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is in this workspace, from ``auth.test``."""

    user_id: str
    bot_id: str
    name: str
    team_id: str


def display_name(user: Mapping[str, Any]) -> str | None:
    """The name Slack shows for ``user`` (display name, else real name, else handle)."""
    profile = user.get("profile") or {}
    for name in (
        profile.get("display_name"),
        profile.get("real_name"),
        user.get("real_name"),
        user.get("name"),
    ):
        if isinstance(name, str) and name.strip():
            return name.strip()
    return None


class UserDirectory:
    """``users.info`` with a cache: names for ids, and admin flags for ``/reset``.

    Entries live ``ttl`` seconds; a failed look-up is remembered for ``negative_ttl`` so a
    broken token or a deleted user does not cost one API call per message.
    """

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        ttl: float = 3600.0,
        negative_ttl: float = 60.0,
        max_entries: int = 5000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl, self.negative_ttl, self.max_entries = ttl, negative_ttl, max_entries
        self.clock = clock
        self._cache: OrderedDict[str, tuple[float, Json | None]] = OrderedDict()

    async def info(self, user_id: str, *, fresh: bool = False) -> Json | None:
        """The ``user`` object, or None when Slack would not say."""
        hit = self._cache.get(user_id)
        if hit is not None and not fresh and hit[0] > self.clock():
            return hit[1]
        user: Json | None = None
        try:
            response = await self.client.users_info(user=user_id, include_locale=True)
            found = response.get("user")
            user = found if isinstance(found, dict) else None
        except Exception:
            log.warning("users.info for %s failed", escape(user_id), exc_info=True)
        self._cache[user_id] = (self.clock() + (self.ttl if user else self.negative_ttl), user)
        self._cache.move_to_end(user_id)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return user

    async def names(self, user_ids: Iterable[str]) -> dict[str, str]:
        """Display names for ``user_ids`` (the id itself when unknown)."""
        unique = list(dict.fromkeys(user_ids))
        infos = await asyncio.gather(*(self.info(uid) for uid in unique))
        pairs = zip(unique, infos, strict=True)
        return {uid: (display_name(i) if i else None) or uid for uid, i in pairs}

    def known(self) -> dict[str, str]:
        """The names already cached (no API call), for neutralising mentions in output."""
        out: dict[str, str] = {}
        for uid, (_, user) in self._cache.items():
            name = display_name(user) if user else None
            if name:
                out[uid] = name
        return out

    async def is_admin(self, user_id: str) -> bool:
        """A workspace admin or owner right now (asked afresh, not from the cache)."""
        user = await self.info(user_id, fresh=True)
        return bool(
            user and (user.get("is_admin") or user.get("is_owner") or user.get("is_primary_owner"))
        )
