"""The Slack adapter: slack-bolt ``AsyncApp`` listeners → ``ChatService``.

Acknowledge after commit, reply after
    bolt runs with ``process_before_response``: a message event's listener returns only
    once the turn is committed (the store's group commit makes that a few milliseconds), so
    Slack's 200 (HTTP mode) or envelope ack (Socket Mode) means stored; when the store
    fails the listener answers 503, which HTTP mode sends and Socket Mode turns into no ack,
    and Slack delivers the event again. The reply (the model call) runs afterwards in a task
    this adapter tracks, so Slack's three seconds are never at risk and shutdown can wait
    for replies in flight. Commands call ``ack()`` first and work after. What the work is:
    :mod:`adapters.slack.events` and :mod:`adapters.slack.commands`; Slack's assistant threads
    (bolt's ``Assistant`` middleware) are :mod:`adapters.slack.assistant`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_bolt import BoltResponse
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.assistant import SlackAssistant
from adapters.slack.catchup import Permalinks, SlackOutlet
from adapters.slack.commands import SlackCommands
from adapters.slack.events import SlackEvents
from adapters.slack.files import file_source
from adapters.slack.options import reveal
from adapters.slack.transport import quiet_bolt_logs
from adapters.slack.users import BotIdentity, UserDirectory
from bot.platform import (
    COMMANDS,
    ConfigError,
    Features,
    PlatformUnreachable,
    Registry,
    Settings,
)

__all__ = ["SlackAdapter", "build_app"]

log = logging.getLogger(__name__)
Json = dict[str, Any]
# bolt passes a listener its arguments by parameter name
CommandListener = Callable[[AsyncAck, Json, AsyncRespond], Awaitable[None]]


class SlackAdapter:
    """Translates Slack events and commands into ``ChatService`` calls and posts the results."""

    def __init__(
        self,
        features: Features,
        settings: Settings,
        client: AsyncWebClient,
        commands: Registry = COMMANDS,
    ) -> None:
        self.service, self.features = features.service, features
        self.settings = settings
        self.client = client
        features.attachments.register(file_source(client))  # files read (bot.attachments)
        self.users = UserDirectory(client)
        self.events = SlackEvents(features, settings, client, self.users, self.identify)
        self.commands = SlackCommands(features, settings.slack, self.users, commands,
                                      client=client, timeout=settings.chat.post_timeout)
        # /catchup and scheduled digests: adapters/slack/catchup.py
        self.commands.links = links = Permalinks(client)
        if (digests := features.catchup_commands.digests) is not None:
            digests.add_outlet("slack", SlackOutlet(client, self.users, links, features.outbox))
        self._identity: BotIdentity | None = None
        self._identity_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.assistant = SlackAssistant(self.events, client, settings.chat, self.users,
                                        self.identify, self.spawn)

    # ------------------------------------------------------------------ lifecycle

    async def identify(self) -> BotIdentity:
        """``auth.test`` once; also names the bot in the service (its assistant turns)."""
        if self._identity is not None:  # every event asks: no lock once known
            return self._identity
        async with self._identity_lock:
            if self._identity is None:
                try:
                    r = await self.client.auth_test()
                except SlackApiError as e:
                    raise ConfigError(
                        f"Slack rejected SLACK_BOT_TOKEN ({e.response.get('error')}); copy the "
                        "Bot User OAuth Token (xoxb-…) from the app's OAuth & Permissions page"
                    ) from None
                except (OSError, aiohttp.ClientError, TimeoutError) as e:
                    host = urlsplit(self.client.base_url).netloc or "slack.com"
                    detail = " ".join(str(e).split())
                    raise PlatformUnreachable(
                        f"cannot reach {host} ({type(e).__name__}: {detail}): check the "
                        "network, DNS, proxy or firewall, and https://slack-status.com"
                    ) from None
                ident = BotIdentity(
                    str(r.get("user_id") or ""),
                    str(r.get("bot_id") or ""),
                    str(r.get("user") or "gistbot"),
                    str(r.get("team_id") or ""),
                )
                self.service.set_identity("slack", ident.user_id, ident.name)
                self._identity = ident
            return self._identity

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``work`` beside the acknowledgement; kept so ``drain`` can wait for it (bolt's
        lazy listeners are started and forgotten: nothing could wait for them at shutdown)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self, within: float | None = None) -> bool:
        """Wait until no work is running (new work started meanwhile included).

        True when idle; False when ``within`` seconds passed first.
        """
        deadline = None if within is None else time.monotonic() + within
        while self._tasks:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            await asyncio.wait(set(self._tasks), timeout=left)
        return True

    async def close(self, within: float = 10.0) -> None:
        """Let replies in flight finish (up to ``within`` seconds), then cancel the rest."""
        if not await self.drain(within):
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------------ listeners

    def register(self, app: AsyncApp) -> None:
        """Attach the listeners to ``app``."""

        async def on_event(body: Json) -> BoltResponse | None:
            if await self.events.receive(body, self.spawn):
                return None  # bolt acknowledges: 200, or the Socket Mode envelope ack
            return BoltResponse(status=503, body="not stored; deliver again")

        app.use(self.assistant.changes)  # edits in its threads, which bolt's would swallow
        app.use(self.assistant.middleware)  # assistant threads, before the listeners below
        app.event("message")(on_event)
        app.event("app_mention")(on_event)
        for name in self.commands.commands.names():  # the registry's commands
            app.command(f"/{name}")(self._command_listener(f"/{name}"))

    def _command_listener(self, name: str) -> CommandListener:
        async def on_command(ack: AsyncAck, command: Json, respond: AsyncRespond) -> None:
            await ack()
            self.spawn(self.commands.handle(name, command, respond))

        return on_command


def build_app(adapter: SlackAdapter) -> AsyncApp:
    """A bolt ``AsyncApp`` with ``adapter``'s listeners (nothing is started).

    Requests are signature-checked with ``SLACK_SIGNING_SECRET`` in HTTP mode, once, by the
    gate in front of bolt (``adapters.slack.transport``: before anything is parsed; an
    unset secret rejects every HTTP request), so bolt's own check, which runs after it
    parsed the body, is off; Socket Mode requests need no signature.
    """
    logger = logging.getLogger("gistbot.slack.bolt")
    quiet_bolt_logs(logger)  # first: bolt copies its base logger's filters to its own loggers
    app = AsyncApp(
        name="gistbot",
        client=adapter.client,
        # explicit, so bolt never falls back to the process environment
        signing_secret=reveal(adapter.settings.slack.slack_signing_secret) or "",
        logger=logger,
        process_before_response=True,  # the listener's outcome is the acknowledgement
        request_verification_enabled=False,  # the gate checked it, before any parsing
    )
    adapter.register(app)
    return app
