"""The memory inspector: the channel list, a channel's page and the operator's actions.

Every page needs a session (``bot.admin.auth``); every change is a POST carrying the
session's CSRF token, answers with a redirect back to the channel page (so a reload repeats
nothing) and is logged with the operator's address. Editing the summary commits with the
version the page was loaded at — the same check a compaction's commit makes — so an edit
never overwrites a compaction that landed meanwhile, nor the other way round: the operator
is told, and their text is shown again to re-apply.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from bot.admin.auth import COOKIE, Session, Sessions
from bot.admin.metrics import Metrics
from bot.admin.plot import prompt_plot
from bot.admin.templates import render
from memory.errors import StoreError
from memory.history import ChannelOverview, summary_diff
from memory.manager import MemoryManager
from memory.models import ChannelKey, Turn
from memory.search_text import query_terms
from memory.store import Store

__all__ = ["Inspector"]

log = logging.getLogger("gistbot.admin")
LIST_LIMIT = 500
RECENT_TURNS = 50
FULL_HISTORY_SCAN = 200_000  # at most this many turns are read to price the full history


def when(ts: float | None) -> str:
    """A UTC time for the page, or "never"."""
    if ts is None:
        return "never"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(ts: float | None, now: float) -> str:
    """How long ago ``ts`` was, roughly."""
    if ts is None:
        return "–"
    s = max(0, int(now - ts))
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h"


def ref_of(key: ChannelKey) -> str:
    """The ``c`` parameter naming a channel (platform:workspace:channel)."""
    return f"{key.platform}:{key.workspace}:{key.channel}"


def key_of(ref: str | None) -> ChannelKey:
    """The channel a ``c`` parameter names; 400 when malformed."""
    parts = (ref or "").split(":", 2)
    if len(parts) != 3 or not all(parts):
        raise web.HTTPBadRequest(text="c must be platform:workspace:channel")
    return ChannelKey(*parts)


@dataclass
class Inspector:
    """Route handlers over the runtime's store and memory."""

    store: Store
    memory: MemoryManager
    metrics: Metrics
    sessions: Sessions
    clock: Any = time.time
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def routes(self) -> list[web.RouteDef]:
        """The inspector's routes, all under ``/inspector``."""
        return [
            web.get("/inspector", self.channels), web.get("/inspector/", self.channels),
            web.get("/inspector/login", self.login_page),
            web.post("/inspector/login", self.login),
            web.post("/inspector/logout", self.logout),
            web.get("/inspector/channel", self.channel),
            web.post("/inspector/channel/summary", self.edit_summary),
            web.post("/inspector/channel/fact/delete", self.delete_fact),
            web.post("/inspector/channel/turn/delete", self.delete_turn),
            web.post("/inspector/channel/reset", self.reset),
            web.post("/inspector/channel/compact", self.compact),
        ]

    # ------------------------------------------------------------------ auth

    @staticmethod
    def _page(html: str, status: int = 200) -> web.Response:
        return web.Response(text=html, status=status, content_type="text/html", headers={
            "Cache-Control": "no-store", "X-Frame-Options": "DENY",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                       "img-src 'self'; form-action 'self'; "
                                       "frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff"})

    def _session(self, request: web.Request) -> Session:
        session = self.sessions.get(request.cookies.get(COOKIE))
        if session is None:
            if request.method == "GET":
                raise web.HTTPSeeOther("/inspector/login")
            raise web.HTTPUnauthorized(text="log in first")
        return session

    async def _change(self, request: web.Request) -> tuple[Session, Any, ChannelKey]:
        """The session, form and channel of a change; 401 without a session, 403 without
        the session's CSRF token."""
        session = self._session(request)
        form = await request.post()
        if not self.sessions.csrf_ok(session, form.get("csrf")):  # type: ignore[arg-type]
            raise web.HTTPForbidden(text="missing or wrong CSRF token; reload the page")
        return session, form, key_of(form.get("c"))  # type: ignore[arg-type]

    def _done(self, session: Session, key: ChannelKey, action: str, outcome: str, notice: str,
              request: web.Request) -> web.Response:
        log.warning("admin %s from %s on %s: %s", action, request.remote, ref_of(key), outcome)
        self.metrics.admin_actions.labels(action, outcome).inc()
        session.notice = notice
        raise web.HTTPSeeOther(f"/inspector/channel?c={_quote(ref_of(key))}")

    async def login_page(self, request: web.Request) -> web.Response:
        """The login form."""
        return self._page(render("login"))

    async def login(self, request: web.Request) -> web.Response:
        """Check the token; 401 with the form again when wrong."""
        address = request.remote or "?"
        if self.sessions.throttled(address):
            log.warning("admin login from %s refused: too many failures", address)
            return self._page(render("login", error="Too many failed logins; wait a minute."),
                              429)
        form = await request.post()
        sid = self.sessions.login(str(form.get("token", "")), address)
        if sid is None:
            log.warning("admin login from %s failed: wrong token", address)
            return self._page(render("login", error="Wrong token."), 401)
        log.warning("admin login from %s", address)
        response = web.HTTPSeeOther("/inspector/")
        response.set_cookie(COOKIE, sid, httponly=True, samesite="Strict", path="/inspector",
                            max_age=8 * 3600)
        raise response

    async def logout(self, request: web.Request) -> web.Response:
        """End the session (a POST with the CSRF token)."""
        session = self._session(request)
        form = await request.post()
        if not self.sessions.csrf_ok(session, form.get("csrf")):  # type: ignore[arg-type]
            raise web.HTTPForbidden(text="missing or wrong CSRF token")
        self.sessions.logout(request.cookies.get(COOKIE))
        response = web.HTTPSeeOther("/inspector/login")
        response.del_cookie(COOKIE, path="/inspector")
        raise response

    # ------------------------------------------------------------------ pages

    async def channels(self, request: web.Request) -> web.Response:
        """Every channel with its counts; search by name, filter by platform."""
        session = self._session(request)
        q = request.query.get("q", "").strip().lower()
        platform = request.query.get("platform", "")
        rows: list[ChannelOverview] = await self.store.channel_overview()
        self.metrics.update_lag(rows)
        platforms = sorted({r.key.platform for r in rows})
        picked = [r for r in rows if (not platform or r.key.platform == platform)
                  and (not q or q in ref_of(r.key).lower())]
        picked.sort(key=lambda r: r.last_activity or 0, reverse=True)
        now = self.clock()
        shown = [{"key": r.key, "ref": ref_of(r.key), "turns": r.turns, "pending": r.pending,
                  "lag": ago(r.oldest_pending_at, now), "last": when(r.last_activity),
                  "compacted": when(r.last_compacted_at)} for r in picked[:LIST_LIMIT]]
        notice, session.notice = session.notice, ""
        return self._page(render("channels", rows=shown, total=len(picked), q=q,
                                 platform=platform, platforms=platforms, csrf=session.csrf,
                                 notice=notice))

    async def channel(self, request: web.Request, *, draft: str | None = None,
                      error: str = "", status: int = 200) -> web.Response:
        """One channel: summary, history, identifiers, facts, episodes, turns, the plot."""
        session = self._session(request)
        key = key_of(request.query.get("c") if draft is None else
                     (await request.post()).get("c"))  # type: ignore[arg-type]
        q = request.query.get("q", "").strip()
        state = await self.store.state(key, facts_limit=1000)
        stats = await self.memory.stats(key)
        versions = await self.store.summary_history_of(key, limit=100)
        history = []
        for i, v in enumerate(versions):
            older = versions[i + 1].text if i + 1 < len(versions) else ""
            history.append({"version": v.version, "when": when(v.committed_at),
                            "source": v.source, "author": v.author, "folded": v.folded,
                            "first_seq": v.first_seq, "last_seq": v.last_seq,
                            "diff": summary_diff(older, v.text)})
        facts = await self.store.list_facts(key, include_superseded=True, limit=500)
        episodes = [{"first_seq": e.first_seq, "last_seq": e.last_seq, "text": e.text,
                     "speakers": e.speakers, "when": f"{when(e.started_at)} – {when(e.ended_at)}"}
                    for e in await self.store.episodes(key, limit=50)]
        turns = await self._turns(key, state.folded_through, q)
        notice, session.notice = session.notice, ""
        return self._page(render(
            "channel", key=key, ref=ref_of(key), state=state, stats=stats,
            compacted=when(state.last_compacted_at), busy=self.memory.busy(key),
            history=history, facts=facts, episodes=episodes, q=q, draft=draft,
            turns=[{**_turn_row(t), "folded": t.seq <= state.folded_through} for t in turns],
            plot=await self._plot(key), csrf=session.csrf, notice=notice, error=error,
        ), status)

    async def _turns(self, key: ChannelKey, folded_through: int, q: str) -> list[Turn]:
        if q:
            found = await self.store.search_turns(key, query_terms(q), before_seq=2**62,
                                                  limit=RECENT_TURNS)
            return sorted(found, key=lambda t: t.seq, reverse=True)
        _, unfolded = await self.store.snapshot(key, limit=RECENT_TURNS, facts_limit=0)
        newest = max([folded_through, *(t.seq for t in unfolded)])
        seqs = range(max(1, newest - RECENT_TURNS + 1), newest + 1)
        return sorted(await self.store.turns_at(key, list(seqs)), key=lambda t: -t.seq)

    async def _plot(self, key: ChannelKey) -> str:
        points = self.metrics.prompt_points(key)
        if not points:
            return prompt_plot([])
        upto, full, after, running = max(p.seq for p in points), {}, 0, 0
        wanted = sorted({p.seq for p in points})
        i = read = 0
        while after < upto and read < FULL_HISTORY_SCAN:
            batch = await self.store.turns(key, after_seq=after, limit=1000)
            if not batch:
                break
            read += len(batch)
            for t in batch:
                while i < len(wanted) and wanted[i] < t.seq:
                    full[wanted[i]] = running
                    i += 1
                running += t.tokens
            after = batch[-1].seq
        for seq in wanted[i:]:
            full[seq] = running
        return prompt_plot([(p.seq, p.prompt_tokens, full.get(p.seq, 0)) for p in points])

    # ------------------------------------------------------------------ actions

    async def edit_summary(self, request: web.Request) -> web.Response:
        """Save the summary as a new version if the channel's version did not move."""
        session, form, key = await self._change(request)
        text = str(form.get("text", "")).replace("\r\n", "\n").strip()
        try:
            expected = int(str(form.get("version", "")))
        except ValueError:
            raise web.HTTPBadRequest(text="version must be a number") from None
        ok = await self.store.edit_summary(key, expected_version=expected, text=text,
                                           now=self.clock(), author=request.remote or "?")
        if ok:
            return self._done(session, key, "edit_summary", "saved",
                              "Summary saved as a new version.", request)
        current = (await self.store.state(key, facts_limit=0)).version
        log.warning("admin edit_summary from %s on %s: refused (version %d, now %d)",
                    request.remote, ref_of(key), expected, current)
        self.metrics.admin_actions.labels("edit_summary", "conflict").inc()
        return await self.channel(
            request, draft=text, status=409,
            error=f"Not saved: the summary changed while you were editing (version {expected} "
                  f"is now {current}, e.g. a compaction committed). The current summary is "
                  "shown in the history; your text is kept in the box: review and save again.")

    async def delete_fact(self, request: web.Request) -> web.Response:
        """Delete one long-term fact."""
        session, form, key = await self._change(request)
        try:
            fact_id = int(str(form.get("fact", "")))
        except ValueError:
            raise web.HTTPBadRequest(text="fact must be a number") from None
        gone = await self.store.delete_fact(key, fact_id)
        outcome = "deleted" if gone else "missing"
        return self._done(session, key, "delete_fact", outcome,
                          f"Fact #{fact_id} deleted." if gone else f"No fact #{fact_id} here.",
                          request)

    async def delete_turn(self, request: web.Request) -> web.Response:
        """Delete one unsummarized turn (a summarized one is part of the summary: edit that)."""
        session, form, key = await self._change(request)
        message_id = str(form.get("message", ""))
        outcome = await self.memory.delete(key, message_id)
        notice = {"deleted": "Message deleted.",
                  "folded": "That message is already summarized; edit the summary instead.",
                  }.get(outcome, "No such message.")
        return self._done(session, key, "delete_turn", outcome, notice, request)

    async def reset(self, request: web.Request) -> web.Response:
        """Forget the channel (needs the confirmation box)."""
        session, form, key = await self._change(request)
        if form.get("confirm") != "yes":
            return self._done(session, key, "reset", "unconfirmed",
                              "Not reset: tick the confirmation box first.", request)
        r = await self.memory.reset(key)
        return self._done(session, key, "reset", "done",
                          f"Channel reset: {r.turns} messages, {r.channel_facts} facts and "
                          f"{r.episodes} episodes forgotten.", request)

    async def compact(self, request: web.Request) -> web.Response:
        """Start a compaction now (forced) in the background."""
        session, _, key = await self._change(request)
        task = asyncio.create_task(self._compact(key), name=f"admin compact {key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return self._done(session, key, "compact", "started",
                          "Compaction started; reload to see the result.", request)

    async def _compact(self, key: ChannelKey) -> None:
        try:
            done = await self.memory.compact_now(key, force=True)
            log.info("admin compaction of %s: %s", ref_of(key),
                     "committed" if done else "nothing committed")
        except (StoreError, Exception):
            log.warning("admin compaction of %s failed", ref_of(key), exc_info=True)

    async def close(self) -> None:
        """Wait for compactions the inspector started."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _turn_row(t: Turn) -> dict[str, Any]:
    return {"seq": t.seq, "when": when(t.sent_at), "author_name": t.author_name,
            "author_id": t.author_id, "role": t.role, "text": t.text,
            "message_id": t.message_id}


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")
