"""The catch-up feature: ``/catchup`` and ``/digest`` as the adapters call them (paid by
the caller's and the server's daily quotas), built from ``Settings`` by ``bot.app``."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.access import NO_LISTS, AccessRules, Verdict
from bot.catchup.command import Catchups, Where
from bot.catchup.digest_request import DigestRequest
from bot.catchup.digests import DigestScheduler
from bot.catchup.gather import Catchup, Limits
from bot.catchup.since import CatchupArgs
from bot.channels.config import ChannelConfig
from bot.channels.quota import Quota
from bot.errors import OverQuota
from bot.llm.client import LLM
from bot.messages import CommandResult
from bot.settings import Settings
from bot.stores import Storage
from memory.tokens import Tokenizer

__all__ = ["CatchupCommands", "build_catchup"]


class CatchupCommands:
    """``/catchup`` and ``/digest``; without ``catchups`` (no store) they say they are not
    available here."""

    def __init__(self, quota: Quota, catchups: Catchups | None = None,
                 digests: DigestScheduler | None = None) -> None:
        self.quota, self.catchups, self.digests = quota, catchups, digests

    async def catchup(self, where: Where, author_id: str,
                      text: str | CatchupArgs = "", *, public: bool = False) -> CommandResult:
        """``/catchup [since] [zone] [public]``: what happened since (``bot.catchup.command``;
        the text, or its arguments as ``bot.commands.catchup`` read them), paid by the caller
        and their server; ``public``: the answer is posted for everyone here."""
        if self.catchups is None:
            return CommandResult("Catch-up is not available here.", ok=False)
        with self.quota.paying(where.key, "catchup", author_id):
            try:
                return await self.catchups.command(where, author_id, text, public=public)
            except OverQuota as e:
                return CommandResult(e.user_message, ok=False)

    async def digest(self, where: Where, text: str | DigestRequest, *, allowed: bool,
                     by: str = "", refusal: str = "") -> CommandResult:
        """``/digest daily|weekly|off|now``: scheduled digests (``bot.catchup.digests``; the text,
        or the request ``bot.commands.digest`` read); ``now`` is paid by the server, like a
        scheduled one."""
        if self.digests is None:
            return CommandResult("Digests are not available here.", ok=False)
        with self.quota.paying(where.key, "digest"):
            try:
                return await self.digests.command(where, text, allowed=allowed, by=by,
                                                  refusal=refusal)
            except OverQuota as e:
                return CommandResult(e.user_message, ok=False)


def build_catchup(settings: Settings, budget: Limits, storage: Storage, llm: LLM,
                  tokenizer: Tokenizer, quota: Quota, *, channels: ChannelConfig | None = None,
                  access: AccessRules | None = None) -> CatchupCommands:
    """The catch-up feature with its digest scheduler (not started): its section of the
    settings, the shared budget, map calls up to twice the endpoint's slots; with
    ``access`` (and the servers' own lists through ``channels``) no digest is posted in a
    channel the lists keep the bot out of, nor in a direct conversation whose person they
    refuse."""
    section = settings.catchup
    store = storage.memory
    engine = Catchup(store, llm, tokenizer, section, budget,
                     parallel=max(1, settings.llm.llm_concurrency * 2))
    catchups = Catchups(engine, store, ZoneInfo(section.timezone))
    kept_out = None
    if access is not None:
        rules = access

        async def kept_out(where: Where, by: str) -> bool:
            server = (await channels.get(where.key)).access if channels is not None else NO_LISTS
            if where.direct:  # the conversation of the person who scheduled it
                return rules.verdict(where.key, by, where.roles, direct=True,
                                     server=server) is not Verdict.ADMITTED
            return rules.keeps_out(where.key, parent=where.parent, server=server)

    digests = DigestScheduler(storage.digests, catchups, default_zone=section.timezone,
                              payer=lambda key: quota.bill(key, "digest"), kept_out=kept_out)
    return CatchupCommands(quota, catchups, digests)
