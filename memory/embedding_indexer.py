"""Embedding stored turns in the background, in batches, never on the reply path.

``EmbeddingIndexer`` runs one task per process. A recorded or edited turn marks its
channel (``notify``); the task embeds the channel's newest unembedded people's turns
(within ``RECENT_SPAN`` seqs of the newest) in batches of ``batch``, ``LINGER`` seconds
after the first notice (so a burst shares a request), then walks every
channel's older turns downwards, one batch per channel in turn (the backlog, so a
database from before or a changed ``EMBEDDING_MODEL`` is covered). Notified channels go
first. Each batch is one request, paid by the channel's server like a background summary.

Failures degrade: an account over its daily limit (``CallRefused``) stops that channel's
embedding for ``REFUSED_PAUSE`` seconds; any other error (endpoint down, a reply took the
slot) pauses the whole task with exponential backoff. Lost notifications (a crash) are
caught by the next start's backlog pass. Replicas may embed the same turn twice; the
store keeps one vector per turn and model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from memory.embedding_store import EmbeddingStore, pack
from memory.errors import CallRefused, Preempted
from memory.models import ChannelKey, Turn
from memory.semantic import MAX_CHARS, TextEmbedder

__all__ = ["BACKLOG_SPAN", "LINGER", "RECENT_SPAN", "REFUSED_PAUSE", "EmbeddingIndexer"]

log = logging.getLogger(__name__)

RECENT_SPAN = 1024
"""Seqs below the newest that a notified channel's pass looks at (edits are of unfolded,
hence recent, turns; a file read late amends a turn as recent as its download)."""
BACKLOG_SPAN = 4096
"""Seqs one backlog step looks at: its cost follows this, not the channel's length."""
LINGER = 1.0
"""Seconds a notified channel waits before its batch, so a burst of messages shares one
request instead of one each."""
REFUSED_PAUSE = 600.0
"""Seconds a channel whose payer is over its daily limit is left alone."""
_BACKOFF = (1.0, 5.0, 30.0, 120.0, 300.0)


class EmbeddingIndexer:
    """Embeds stored people's turns of every channel (module docstring)."""

    def __init__(self, store: EmbeddingStore, embedder: TextEmbedder, *, batch: int = 32,
                 linger: float = LINGER, clock: Callable[[], float] = time.monotonic) -> None:
        if batch < 1 or linger < 0:
            raise ValueError("batch must be at least 1 and linger at least 0")
        self.store, self.embedder, self.batch, self.clock = store, embedder, batch, clock
        self.linger = linger
        self.embedded = 0
        """Vectors stored by this process."""
        self.batches = 0
        """Embedding requests that succeeded."""
        self.failures = 0
        """Embedding requests that failed (refused ones included)."""
        self._recent: dict[ChannelKey, float] = {}  # notified channel -> first notice
        self._backlog: dict[ChannelKey, int | None] = {}  # channel -> next ``below``
        self._paused: dict[ChannelKey, float] = {}  # refused until
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    @property
    def model(self) -> str:
        """The embedding model whose vectors are written."""
        return self.embedder.model

    def notify(self, key: ChannelKey) -> None:
        """A turn of ``key`` was recorded or edited: embed its newest turns after
        ``linger`` seconds (the turns that arrive meanwhile go in the same batch)."""
        self._recent.setdefault(key, self.clock())
        self._idle.clear()
        self._wake.set()

    def backlog(self, key: ChannelKey) -> None:
        """Embed every older turn of ``key`` that has no vector yet, newest first."""
        self._backlog.setdefault(key, None)
        self._idle.clear()
        self._wake.set()

    def start(self, channels: Sequence[ChannelKey] = ()) -> None:
        """Start the task, with a backlog pass over ``channels``."""
        for key in channels:
            self.backlog(key)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="gistbot-embeddings")

    async def close(self) -> None:
        """Stop the task (a batch in flight is abandoned; it is embedded again later)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_idle(self) -> None:
        """Wait until nothing is left to embed but paused channels (tests, benchmarks)."""
        await self._idle.wait()

    # ------------------------------------------------------------------ the task

    async def _run(self) -> None:
        errors = 0
        while True:
            key, below = self._next()
            if key is None:
                if not self._has_work():
                    self._idle.set()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._wait()):
                        await self._wake.wait()
                continue
            try:
                await self._step(key, below)
                errors = 0
            except Preempted:  # a reply took the slot: go on soon, not a failure
                self._requeue(key, below)
                await asyncio.sleep(_BACKOFF[0])
            except CallRefused:
                self.failures += 1
                self._paused[key] = self.clock() + REFUSED_PAUSE
                log.info("embedding for %s paused: its daily token limit is used up", key)
            except Exception:
                self.failures += 1
                delay = _BACKOFF[min(errors, len(_BACKOFF) - 1)]
                errors += 1
                (log.warning if errors == 1 else log.debug)(
                    "embedding turns failed; retrying in %.0f s", delay, exc_info=errors == 1)
                self._requeue(key, below)
                await asyncio.sleep(delay)

    def _next(self) -> tuple[ChannelKey | None, int | None]:
        """The next piece of work: a notified channel whose ``linger`` is over (below
        None), else a backlog step."""
        now = self.clock()
        for key, since in list(self._recent.items()):
            if self._paused.get(key, 0.0) <= now and since + self.linger <= now:
                del self._recent[key]
                return key, None
        for key in list(self._backlog):
            if self._paused.get(key, 0.0) <= now:
                below = self._backlog.pop(key)
                return key, -1 if below is None else below
        return None, None

    def _has_work(self) -> bool:
        """Whether a channel that is not paused waits to be embedded (lingering or not)."""
        now = self.clock()
        return any(self._paused.get(k, 0.0) <= now for k in (*self._recent, *self._backlog))

    def _requeue(self, key: ChannelKey, below: int | None) -> None:
        if below is None:
            self._recent.setdefault(key, self.clock() - self.linger)
        else:
            self._backlog[key] = None if below == -1 else below

    def _wait(self) -> float | None:
        """Seconds until some queued work may go on (None: nothing queued)."""
        now = self.clock()
        times = [max(self._paused.get(k, 0.0), since + self.linger)
                 for k, since in self._recent.items()]
        times += [self._paused.get(k, 0.0) for k in self._backlog]
        return max(min(times) - now, 0.0) if times else None

    async def _step(self, key: ChannelKey, below: int | None) -> None:
        """One batch: the newest unembedded turns (``below`` None) or a backlog step
        (``below`` -1: from the top). Requeues what is left."""
        recent = below is None
        turns, floor = await self.store.unembedded_turns(
            key, self.model, below=None if recent or below == -1 else below,
            span=RECENT_SPAN if recent else BACKLOG_SPAN, limit=self.batch)
        if turns:
            await self._embed(key, turns)
        full = len(turns) >= self.batch
        if recent:
            if full:
                self._recent.setdefault(key, self.clock() - self.linger)
        else:
            nxt = turns[-1].seq if full else floor
            if nxt > 1:
                self._backlog[key] = nxt

    async def _embed(self, key: ChannelKey, turns: list[Turn]) -> None:
        vectors = await self.embedder.embed(
            key, [t.text[:MAX_CHARS] or " " for t in turns], purpose="index")
        if len(vectors) != len(turns):
            raise ValueError(f"asked for {len(turns)} embeddings, got {len(vectors)}")
        self.batches += 1
        self.embedded += await self.store.put_embeddings(
            key, self.model, [(t, pack(v)) for t, v in zip(turns, vectors, strict=True)])
