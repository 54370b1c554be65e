"""Semantic recall (``EMBEDDING_MODEL``): the stored turns closest in meaning to a message,
one more ranked list in the recalled turns' fusion (``memory.ranking``).

Word search misses a paraphrase ("Rio de Janeiro" for "Brazil"); an embedding of the
message finds it among the channel's stored turn vectors (``memory.embedding_store``,
written in the background by ``memory.embedding_indexer``). On the reply path only the
message itself is embedded, within ``timeout`` seconds; a timeout or an error falls back
to word search alone (counted in ``fallbacks``, logged once until it works again). The
nearest turns are fused with the word ranking and the other lists by ``ranking.rank``
(``extra=[Ranked(turns, weight)]``; reciprocal rank fusion), at ``WEIGHT``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from memory.embedding_store import EmbeddingStore, pack
from memory.models import ChannelKey, Turn

__all__ = ["WEIGHT", "SemanticRecall", "TextEmbedder"]

log = logging.getLogger(__name__)

WEIGHT = 1.0
"""The semantic list's weight in the fusion of ``ranking.rank``: the lexical list's
(docs/decisions/0028 tells how it was chosen)."""
MAX_CHARS = 2000
"""Characters of a text that are embedded: a bound on one request's tokens."""


class TextEmbedder(Protocol):
    """What memory needs from an embedding endpoint (``bot.llm.embeddings`` implements
    it)."""

    model: str

    async def embed(self, key: ChannelKey, texts: Sequence[str], *, purpose: str
                    ) -> list[list[float]]:
        """One vector per text, in order. ``purpose``: ``"query"`` (a reply's message, on
        the reply path) or ``"index"`` (stored turns, in the background); the channel
        ``key`` says who pays. Raises on failure (``memory.errors.CallRefused`` when the
        payer is over its limit)."""
        ...


class SemanticRecall:
    """The nearest stored turns to a message, for one store and one embedding model."""

    def __init__(self, store: EmbeddingStore, embedder: TextEmbedder, *, timeout: float,
                 limit: int = 60, weight: float = WEIGHT) -> None:
        self.store, self.embedder, self.timeout, self.limit = store, embedder, timeout, limit
        self.weight = weight
        """The nearest turns' weight in the recalled turns' fusion (``ranking.rank``)."""
        self.fallbacks = 0
        """Replies that recalled by words only because the message could not be embedded."""
        self.on_fallback: Callable[[], None] | None = None
        """Told of each fallback (metrics); must not raise."""
        self._failing = False

    @property
    def model(self) -> str:
        """The embedding model whose vectors are searched."""
        return self.embedder.model

    async def nearest(self, key: ChannelKey, message: str, *, before_seq: int) -> list[Turn]:
        """The stored turns before ``before_seq`` closest to ``message``, best first; none
        when the message could not be embedded within ``timeout`` (word search only)."""
        text = message.strip()[:MAX_CHARS]
        if not text or before_seq <= 1:
            return []
        try:
            async with asyncio.timeout(self.timeout):
                vectors = await self.embedder.embed(key, [text], purpose="query")
        except Exception as e:  # any failure: the reply recalls by words
            self.fallbacks += 1
            if self.on_fallback is not None:
                self.on_fallback()
            if not self._failing:
                self._failing = True
                log.warning("could not embed a message (%s); recalling by words only until "
                            "embedding works again", type(e).__name__ if str(e) == "" else e)
            return []
        if self._failing:
            self._failing = False
            log.info("embedding works again; recalling by meaning too")
        if not vectors:
            return []
        return await self.store.nearest_turns(key, self.model, pack(vectors[0]),
                                              before_seq=before_seq, limit=self.limit)
