"""The admin HTTP server (aiohttp) beside the adapters, in the bot's own event loop.

Off unless ``ADMIN_PORT`` is set; it listens on ``ADMIN_HOST`` (loopback by default):

* ``/healthz`` — the process answers and its event loop turns (the loop-lag watcher ticked
  recently): 200, else 503. The container's ``HEALTHCHECK`` calls it.
* ``/readyz`` — the store answers a read within two seconds, every configured platform's
  adapter has logged in, and the model endpoint is not failing (its last call succeeded,
  or a call succeeded within ``MODEL_SEEN_WINDOW``; none yet counts as fine): 200, else
  503, with each check in the JSON body. docker-compose's health check calls it.
* ``/metrics`` — Prometheus text format (``bot.admin.metrics``); compaction lag is read
  from the store at most every ``LAG_REFRESH`` seconds.
* ``/inspector/…`` — the memory inspector, only with ``ADMIN_INSPECTOR=true`` (otherwise
  404, as any unknown path).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, disable_created_metrics, generate_latest

from bot.admin.auth import Sessions
from bot.admin.inspector import Inspector
from bot.admin.metrics import MODEL_SEEN_WINDOW, Metrics
from bot.llm.client import LLM, UsageMeter
from bot.parts import Features
from bot.settings import Settings
from memory.manager import MemoryManager
from memory.models import ChannelKey
from memory.store import Store

__all__ = ["AdminServer", "Served", "admin_server"]

log = logging.getLogger("gistbot.admin")
LAG_REFRESH = 15.0
STORE_TIMEOUT = 2.0
PROBE = ChannelKey("admin", "readyz", "probe")  # read, never written


class Served(Protocol):
    """What the admin server watches and hooks into: the running application's parts and
    its platforms, the installed ones and those the settings start (``bot.app.Runtime``)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def store(self) -> Store: ...
    @property
    def memory(self) -> MemoryManager: ...
    @property
    def llm(self) -> LLM: ...
    @property
    def features(self) -> Features: ...
    @property
    def meter(self) -> UsageMeter: ...
    @property
    def installed_platforms(self) -> Sequence[str]: ...
    @property
    def configured_platforms(self) -> Sequence[str]: ...


class AdminServer:
    """The application and its listener; ``port`` is the bound port once started."""

    def __init__(self, rt: Served, *, host: str, port: int, inspector: bool,
                 token: str | None, metrics: Metrics | None = None) -> None:
        self.rt, self.host, self.requested_port = rt, host, port
        # The *_created series only repeat what Prometheus knows from the first scrape.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.metrics = metrics or Metrics(platforms=rt.installed_platforms)
        self.port = 0
        self.inspector: Inspector | None = None
        if inspector:
            if not token:
                raise ValueError("the inspector needs a token")
            self.inspector = Inspector(rt.store, rt.memory, self.metrics, Sessions(token))
        self._runner: web.AppRunner | None = None
        self._watch: asyncio.Task[None] | None = None
        self._lag_lock = asyncio.Lock()

    def attach(self) -> None:
        """Hook the metrics into the service's observers, the model meter and compaction."""
        self.rt.features.observers.add(self.metrics)
        self.rt.meter.listeners.append(self.metrics.on_usage)
        self.rt.memory.observe_compactions(self.metrics.on_compaction)
        if self.rt.memory.semantic is not None:
            self.rt.memory.semantic.on_fallback = self.metrics.semantic_fallback

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(client_max_size=1024 * 1024)
        app.add_routes([web.get("/healthz", self.healthz), web.get("/readyz", self.readyz),
                        web.get("/metrics", self.prometheus)])
        if self.inspector is not None:
            app.add_routes(self.inspector.routes())
        return app

    async def start(self) -> None:
        """Attach the hooks, start the loop watcher and listen."""
        self.attach()
        self._watch = asyncio.create_task(self.metrics.watch_loop(), name="admin loop watch")
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.requested_port)
        await site.start()
        server: Any = site._server  # the asyncio server, for the port actually bound
        self.port = int(server.sockets[0].getsockname()[1])
        log.info("admin server on http://%s:%d (/healthz /readyz /metrics%s)", self.host,
                 self.port, " /inspector/" if self.inspector else "")

    async def stop(self) -> None:
        """Stop listening and the watcher; let inspector compactions finish."""
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if self._runner is not None:
            await self._runner.cleanup()
        if self.inspector is not None:
            await self.inspector.close()

    # ------------------------------------------------------------------ handlers

    async def healthz(self, request: web.Request) -> web.Response:
        """Alive: this answer itself runs on the loop; the watcher shows it keeps turning."""
        m = self.metrics
        age = None if m.last_tick is None else max(0.0, m.clock() - m.last_tick)
        ok = age is None or age < 10.0
        body = {"status": "ok" if ok else "stalled", "loop_tick_age_seconds": age,
                "loop_lag_seconds": m.last_lag}
        return web.json_response(body, status=200 if ok else 503)

    async def readyz(self, request: web.Request) -> web.Response:
        """Ready: store, platforms and model, each reported."""
        checks: dict[str, dict[str, Any]] = {"store": await self._store_check()}
        for platform in self.rt.configured_platforms:
            up = platform in self.metrics.platforms_up
            checks[platform] = {"ok": up, "detail": "logged in" if up else "not connected yet"}
        checks["model"] = self._model_check()
        ready = all(c["ok"] for c in checks.values())
        return web.json_response({"status": "ready" if ready else "not ready",
                                  "checks": checks}, status=200 if ready else 503)

    async def _store_check(self) -> dict[str, Any]:
        try:
            await asyncio.wait_for(self.rt.store.state(PROBE, facts_limit=0), STORE_TIMEOUT)
        except Exception as e:
            self.metrics.store_error(type(e).__name__)
            return {"ok": False, "detail": f"{type(e).__name__}: {e}"[:200]}
        return {"ok": True, "detail": "answers"}

    def _model_check(self) -> dict[str, Any]:
        m = self.metrics
        if self.rt.llm.is_offline:
            return {"ok": True, "detail": "offline model"}
        now = m.clock()
        ok_at, failed = m.last_model_ok, m.last_model_error
        if failed is None or (ok_at is not None and ok_at >= failed[0]):
            detail = "no call yet" if ok_at is None else f"last call ok {now - ok_at:.0f}s ago"
            return {"ok": True, "detail": detail}
        if ok_at is not None and now - ok_at < MODEL_SEEN_WINDOW:
            return {"ok": True, "detail": f"last call failed ({failed[1]}); a call succeeded "
                                          f"{now - ok_at:.0f}s ago"}
        return {"ok": False, "detail": f"last call failed ({failed[1]}) {now - failed[0]:.0f}s "
                                       "ago and none succeeded since"}

    async def prometheus(self, request: web.Request) -> web.Response:
        """The metrics, compaction lag refreshed if stale."""
        m = self.metrics
        if m.lag_refreshed is None or m.clock() - m.lag_refreshed > LAG_REFRESH:
            async with self._lag_lock:
                if m.lag_refreshed is None or m.clock() - m.lag_refreshed > LAG_REFRESH:
                    try:
                        m.update_lag(await self.rt.store.channel_overview())
                    except Exception as e:
                        m.store_error(type(e).__name__)
                        log.warning("metrics: could not read compaction lag: %s", e)
        return web.Response(body=generate_latest(m.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})


@contextlib.asynccontextmanager
async def admin_server(rt: Served) -> AsyncIterator[AdminServer | None]:
    """The admin server ``rt.settings`` asks for, running for the block; None when off."""
    s = rt.settings
    if s.admin.admin_port is None:
        yield None
        return
    token = s.admin.admin_token.get_secret_value() if s.admin.admin_token else None
    server = AdminServer(rt, host=s.admin.admin_host, port=s.admin.admin_port,
                         inspector=s.admin.admin_inspector, token=token)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
