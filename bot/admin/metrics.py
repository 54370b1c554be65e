"""Prometheus metrics and readiness facts, fed by small hooks in the service, the model
meter and compaction (``memory`` only calls a callback; it imports no metrics library).

Label values are bounded: platforms are the installed ones (the composition root names them),
purposes a short fixed list, models and error kinds are capped (``BoundedLabel``); no channel
id is ever a label. The per-channel prompt sizes the inspector plots are kept in memory for a
bounded number of channels.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from bot.llm.client import UsageRecord
from memory.history import ChannelOverview
from memory.models import ChannelKey

__all__ = ["BoundedLabel", "Metrics", "PromptPoint"]

KINDS = ("reply", "summary", "digest", "embedding")
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
TOKEN_BUCKETS = (250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000)
MODEL_SEEN_WINDOW = 300.0  # seconds a model success keeps /readyz's model check green


class BoundedLabel:
    """Maps free values (model names, error kinds) to at most ``limit`` label values; the
    rest become ``other``, so a misbehaving endpoint cannot grow the series without end."""

    def __init__(self, limit: int, known: Sequence[str] = ()) -> None:
        self.limit = limit
        self.seen: set[str] = set(known)

    def __call__(self, value: str) -> str:
        value = value or "unknown"
        if value in self.seen:
            return value
        if len(self.seen) >= self.limit:
            return "other"
        self.seen.add(value)
        return value


@dataclass(frozen=True, slots=True)
class PromptPoint:
    """One reply's prompt: memory tokens sent, for the message at ``seq``."""

    seq: int
    prompt_tokens: int
    at: float


class Metrics:
    """Every metric of the admin server in its own registry (one per runtime, so tests can
    build many), plus what ``/readyz`` needs to know about the model and the platforms."""

    def __init__(self, *, platforms: Sequence[str] = (), clock: Callable[[], float] = time.time,
                 plot_channels: int = 500, plot_points: int = 300) -> None:
        self.platforms = tuple(platforms)  # the installed ones: each its own label
        self.clock = clock
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.models = BoundedLabel(16)
        self.errors = BoundedLabel(32)
        self._model_metrics(r)
        self._reply_metrics(r)
        self._memory_metrics(r)
        self._health_metrics(r)
        self.last_model_ok: float | None = None
        self.last_model_error: tuple[float, str] | None = None
        self.platforms_up: set[str] = set()
        self.last_tick: float | None = None
        self.last_lag = 0.0
        self.lag_refreshed: float | None = None
        self._plots: OrderedDict[ChannelKey, deque[PromptPoint]] = OrderedDict()
        self._plot_channels, self._plot_points = plot_channels, plot_points

    def platform_label(self, platform: str) -> str:
        """One of the installed platforms, else ``other``."""
        return platform if platform in self.platforms else "other"

    def _model_metrics(self, r: CollectorRegistry) -> None:
        """Model calls: counts, tokens, errors and latency by kind and model."""
        self.model_calls = Counter("gistbot_model_calls", "Model calls by kind, model and outcome",
                                   ["kind", "model", "outcome"], registry=r)
        self.model_tokens = Counter("gistbot_model_tokens", "Model tokens by kind, model and type "
                                    "(prompt, completion)", ["kind", "model", "type"], registry=r)
        self.model_errors = Counter("gistbot_model_errors", "Failed model calls by kind, model "
                                    "and error", ["kind", "model", "error"], registry=r)
        self.model_latency = Histogram("gistbot_model_latency_seconds", "Model call time by kind",
                                       ["kind"], buckets=LATENCY_BUCKETS, registry=r)

    def _reply_metrics(self, r: CollectorRegistry) -> None:
        """Replies and stored turns, per platform: latency, outcome, prompt size."""
        self.reply_latency = Histogram("gistbot_reply_latency_seconds", "From a stored message to "
                                       "its reply, per platform", ["platform"],
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.replies = Counter("gistbot_replies", "Replies by platform and outcome",
                               ["platform", "outcome"], registry=r)
        self.prompt_tokens = Histogram("gistbot_reply_prompt_tokens", "Memory tokens in a reply's "
                                       "prompt, per platform", ["platform"],
                                       buckets=TOKEN_BUCKETS, registry=r)
        self.turns = Counter("gistbot_turns_recorded", "Turns stored, by platform and role",
                             ["platform", "role"], registry=r)

    def _memory_metrics(self, r: CollectorRegistry) -> None:
        """Memory: compactions, what waits to be summarized, channels, recall."""
        self.compactions = Counter("gistbot_compactions", "Compaction attempts by outcome "
                                   "(committed, discarded, rejected, failed, preempted)",
                                   ["outcome"],
                                   registry=r)
        self.pending = Gauge("gistbot_compaction_pending_turns", "Unsummarized turns, per platform",
                             ["platform"], registry=r)
        self.oldest = Gauge("gistbot_compaction_oldest_pending_seconds", "Age of the oldest "
                            "unsummarized turn, per platform", ["platform"], registry=r)
        self.channels = Gauge("gistbot_channels", "Channels with stored memory, per platform",
                              ["platform"], registry=r)
        self.recall_latency = Histogram("gistbot_recall_latency_seconds", "Building a reply's "
                                        "memory view (recall included), per platform",
                                        ["platform"], buckets=FAST_BUCKETS, registry=r)
        self.semantic_fallbacks = Counter(
            "gistbot_semantic_recall_fallbacks", "Replies that recalled by words only because "
            "their message could not be embedded in time (EMBEDDING_MODEL)", registry=r)

    def _health_metrics(self, r: CollectorRegistry) -> None:
        """The process: store failures, event-loop lag, platform connections, admin actions."""
        self.store_errors = Counter("gistbot_store_errors", "Store failures by kind", ["kind"],
                                    registry=r)
        self.loop_lag = Gauge("gistbot_event_loop_lag_seconds", "Latest event-loop lag",
                              registry=r)
        self.loop_lag_hist = Histogram("gistbot_event_loop_lag_seconds_hist", "Event-loop lag",
                                       buckets=FAST_BUCKETS, registry=r)
        self.connected_gauge = Gauge("gistbot_platform_connected", "1 while the platform adapter "
                                     "is logged in and connected", ["platform"], registry=r)
        self.admin_actions = Counter("gistbot_admin_actions", "Inspector actions by action and "
                                     "outcome", ["action", "outcome"], registry=r)

    # ------------------------------------------------------------------ the model meter

    def on_usage(self, rec: UsageRecord) -> None:
        """``UsageMeter`` listener: one model call."""
        kind = rec.purpose if rec.purpose in KINDS else "other"
        model = self.models(rec.model)
        self.model_calls.labels(kind, model, "ok" if rec.ok else "error").inc()
        self.model_latency.labels(kind).observe(rec.latency)
        if rec.ok:
            self.model_tokens.labels(kind, model, "prompt").inc(rec.usage.prompt_tokens)
            self.model_tokens.labels(kind, model, "completion").inc(rec.usage.completion_tokens)
            self.last_model_ok = self.clock()
        else:
            error = self.errors(rec.error or "error")
            self.model_errors.labels(kind, model, error).inc()
            self.last_model_error = (self.clock(), error)

    # ------------------------------------------------------------------ compaction

    def on_compaction(self, outcome: str) -> None:
        """``Compactor.on_outcome``: one compaction attempt."""
        self.compactions.labels(outcome).inc()

    def update_lag(self, rows: Sequence[ChannelOverview]) -> None:
        """Set the compaction-lag gauges from a fresh channel overview."""
        now = self.clock()
        labels = (*self.platforms, "other")
        pending = dict.fromkeys(labels, 0)
        oldest = dict.fromkeys(labels, 0.0)
        channels = dict.fromkeys(labels, 0)
        for row in rows:
            p = self.platform_label(row.key.platform)
            channels[p] += 1
            pending[p] += row.pending
            if row.oldest_pending_at is not None:
                oldest[p] = max(oldest[p], now - row.oldest_pending_at)
        for p in pending:
            self.pending.labels(p).set(pending[p])
            self.oldest.labels(p).set(oldest[p])
            self.channels.labels(p).set(channels[p])
        self.lag_refreshed = now

    # ------------------------------------------------------------------ the service

    def recorded(self, key: ChannelKey, role: str) -> None:
        """``ServiceObserver``: a new turn was stored."""
        self.turns.labels(self.platform_label(key.platform), role).inc()

    def replied(self, key: ChannelKey, seconds: float, prompt_tokens: int, seq: int,
                failed: bool) -> None:
        """``ServiceObserver``: a reply was produced or failed."""
        platform = self.platform_label(key.platform)
        self.replies.labels(platform, "failed" if failed else "ok").inc()
        if failed:
            return
        self.reply_latency.labels(platform).observe(seconds)
        self.prompt_tokens.labels(platform).observe(prompt_tokens)
        points = self._plots.get(key)
        if points is None:
            points = self._plots[key] = deque(maxlen=self._plot_points)
            while len(self._plots) > self._plot_channels:
                self._plots.popitem(last=False)
        self._plots.move_to_end(key)
        points.append(PromptPoint(seq, prompt_tokens, self.clock()))

    def recalled(self, key: ChannelKey, seconds: float) -> None:
        """``ServiceObserver``: a reply's memory view was built."""
        self.recall_latency.labels(self.platform_label(key.platform)).observe(seconds)

    def semantic_fallback(self) -> None:
        """``SemanticRecall.on_fallback``: a reply's message could not be embedded."""
        self.semantic_fallbacks.inc()

    def store_error(self, kind: str) -> None:
        """``ServiceObserver``: a store operation failed."""
        self.store_errors.labels(self.errors(kind)).inc()

    def connected(self, platform: str) -> None:
        """``ServiceObserver``: an adapter logged in."""
        self.platforms_up.add(platform)
        self.connected_gauge.labels(self.platform_label(platform)).set(1)

    def disconnected(self, platform: str) -> None:
        """``ServiceObserver``: an adapter's link dropped."""
        self.platforms_up.discard(platform)
        self.connected_gauge.labels(self.platform_label(platform)).set(0)

    def prompt_points(self, key: ChannelKey) -> list[PromptPoint]:
        """The channel's recent reply prompt sizes, oldest first."""
        return list(self._plots.get(key, ()))

    # ------------------------------------------------------------------ event loop

    async def watch_loop(self, interval: float = 0.5) -> None:
        """Measure how late the event loop wakes a sleeper, forever (cancel to stop)."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(interval)
            lag = max(0.0, loop.time() - started - interval)
            self.loop_lag.set(lag)
            self.last_lag = lag
            self.loop_lag_hist.observe(lag)
            self.last_tick = self.clock()
