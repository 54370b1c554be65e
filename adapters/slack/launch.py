"""Run the Slack adapter (imports slack-bolt: reach it through ``adapters.slack``, which
says which extra to install when it is missing)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.backfill import Backfiller, HistoryStore
from adapters.slack.app import SlackAdapter, build_app
from adapters.slack.backfill import slack_backfiller, trigger_on_reconnect
from adapters.slack.options import reveal
from adapters.slack.transport import connect_socket_mode, serve_http
from adapters.slack.users import BotIdentity
from adapters.slack.web import make_web_client
from bot.platform import (
    ChatService,
    ConfigError,
    Features,
    IncomingMessage,
    Settings,
    answer_missed_mentions,
    stop_answering_missed,
)

__all__ = ["author_now", "make_backfill", "serve", "start_answering_missed"]

log = logging.getLogger(__name__)


async def serve(
    features: Features,
    settings: Settings,
    *,
    client: AsyncWebClient | None = None,
    stop: asyncio.Event | None = None,
    history: HistoryStore | None = None,
    grace: float = 10.0,
) -> None:
    """Run the Slack adapter until cancelled (or ``stop`` is set).

    Socket Mode when ``SLACK_APP_TOKEN`` is set, else HTTP mode on ``HOST:PORT``. With
    ``history`` (the store) missed messages are backfilled on start and on every Socket
    Mode reconnect (``adapters.slack.backfill``).
    Raises ``ConfigError`` when the bot token is rejected or neither mode is configured.
    On ``stop`` the connection closes first (no new events: Slack re-delivers what it
    could not hand over), then replies in flight get ``grace`` seconds (the rest end with
    an apology and are answered after the restart).
    """
    section = settings.slack
    app_token = reveal(section.slack_app_token)
    if app_token is None and section.slack_signing_secret is None:
        raise ConfigError(
            "Slack needs SLACK_APP_TOKEN (Socket Mode) or "
            "SLACK_SIGNING_SECRET (HTTP mode); set one of them"
        )
    adapter = SlackAdapter(features, settings, client or make_web_client(
        section, timeout=settings.chat.post_timeout))
    me = await adapter.identify()
    app = build_app(adapter)
    backfill = make_backfill(adapter, me, features.service, settings, history)
    waiting = stop or asyncio.Event()  # never set: run until cancelled
    sweeping = asyncio.Event()
    missed = start_answering_missed(adapter, sweeping)
    try:
        await _connected(app, adapter, me, settings, backfill, waiting)
    finally:
        if backfill is not None:
            await backfill.close()
        await stop_answering_missed(missed, sweeping, grace)
        await adapter.close(within=grace)


async def _connected(app: AsyncApp, adapter: SlackAdapter, me: BotIdentity,
                     settings: Settings, backfill: Backfiller | None,
                     stop: asyncio.Event) -> None:
    """Stay connected until ``stop`` is set: Socket Mode when there is an app token (a
    reconnect backfills again), else HTTP; the backfill starts once connected."""
    section = settings.slack
    app_token = reveal(section.slack_app_token)
    if app_token is not None:
        async with connect_socket_mode(app, app_token, adapter.client) as handler:
            log.info("Slack: connected in Socket Mode as @%s (team %s)", me.name, me.team_id)
            if backfill is not None:
                await trigger_on_reconnect(handler.client, backfill)
                backfill.trigger("start")
            await stop.wait()
    else:
        async with serve_http(app, section.host, section.port) as url:
            log.info("Slack: HTTP mode as @%s, listening on %s", me.name, url)
            if backfill is not None:
                backfill.trigger("start")
            await stop.wait()


def make_backfill(adapter: SlackAdapter, me: BotIdentity, service: ChatService,
                  settings: Settings, history: HistoryStore | None) -> Backfiller | None:
    """The backfill after downtime, or None when off (no store, or the bound is 0)."""
    most = settings.restarts.backfill_max_messages
    if history is None or most <= 0:
        return None
    return slack_backfiller(adapter.client, me, adapter.users, service, history, most)


async def author_now(msg: IncomingMessage) -> IncomingMessage:
    """``msg`` (rebuilt from storage for a late answer) as the access lists need it: a
    direct message is a conversation whose id starts with D (Slack has no roles, and a
    thread is in its channel already)."""
    return replace(msg, is_direct=msg.key.channel.startswith("D"))


def start_answering_missed(adapter: SlackAdapter, stop: asyncio.Event) -> asyncio.Task[None]:
    """Startup hook: answer the mentions a crash left unanswered (those the access lists
    still admit), then keep sweeping."""
    return asyncio.get_running_loop().create_task(
        answer_missed_mentions(adapter.features, "slack", adapter.events.flow, stop,
                               refresh=author_now)
    )
