"""The embedding role of a store: one vector per stored turn and model, and a scan for the
nearest ones (semantic recall, ``memory.semantic``).

A vector is stored as normalized float32, little-endian (``pack``), keyed by the turn's
channel and seq plus the model's name: a changed ``EMBEDDING_MODEL`` ignores the vectors of
another model. Deleting a turn (``delete``, ``/reset``, retention) drops its vectors and
editing its text drops them too, in the same transaction (triggers on ``turns``), so the
indexer embeds the new text. A vector is written only if the turn's text is still the one
that was embedded, so an edit racing the indexer never leaves a stale vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from memory.models import ChannelKey, Turn

__all__ = ["MAX_SCAN", "MIN_SEPARATION", "SEPARATION_ROWS", "EmbeddingStore", "nearest",
           "pack", "unpack"]

MAX_SCAN = 20_000
"""Vectors a scan compares at most: the channel's newest. Older turns are still found by
word search; a longer horizon costs ~1.5 KB read per turn and reply at 384 dimensions."""


MIN_SEPARATION = 3.5
"""Standard deviations the best match must stand above the scanned vectors' mean for a
semantic ranking to count: a model that cannot read the language ranks every turn about
alike, and its best match does not stand out (docs/decisions/0026 has the measurements)."""
SEPARATION_ROWS = 20
"""Fewer scanned vectors than this: every ranking counts (too few to measure a spread)."""


def pack(vector: Sequence[float]) -> bytes:
    """``vector`` normalized to unit length, as float32 little-endian bytes."""
    arr = np.asarray(vector, dtype="<f4")
    norm = float(np.linalg.norm(arr))
    return (arr / norm if norm > 0 else arr).astype("<f4").tobytes()


def unpack(blob: bytes) -> np.ndarray:
    """The float32 vector ``pack`` stored."""
    return np.frombuffer(blob, dtype="<f4")


def nearest(query: bytes, rows: Sequence[tuple[int, bytes]], limit: int) -> list[tuple[int, float]]:
    """(seq, cosine) of the ``limit`` rows closest to ``query``, best first; rows whose
    vector has another dimension than the query's (a model renamed in place) are skipped.

    None when the best row does not stand out: among at least ``SEPARATION_ROWS`` rows,
    its cosine is less than ``MIN_SEPARATION`` standard deviations above their mean. A
    model that cannot tell the channel's texts apart (an English model on Korean) ranks
    them at random, and fused with word search that would push real matches out."""
    q = unpack(query)
    same = [(seq, blob) for seq, blob in rows if len(blob) == len(query)]
    if not same or limit <= 0:
        return []
    matrix = np.frombuffer(b"".join(blob for _, blob in same), dtype="<f4").reshape(len(same), -1)
    scores = matrix @ q
    if len(same) >= SEPARATION_ROWS:
        spread = float(scores.std())
        if spread <= 0 or (float(scores.max()) - float(scores.mean())) / spread < MIN_SEPARATION:
            return []
    top = np.argpartition(-scores, limit - 1)[:limit] if limit < len(same) else np.arange(len(same))
    order = top[np.argsort(-scores[top], kind="stable")]
    return [(same[i][0], float(scores[i])) for i in order]


@runtime_checkable
class EmbeddingStore(Protocol):
    """Stored turn vectors (both backends; ``tests/harness/store_contract.py``)."""

    async def unembedded_turns(
        self, key: ChannelKey, model: str, *, below: int | None, span: int, limit: int
    ) -> tuple[list[Turn], int]:
        """People's turns (not the bot's) with ``floor <= seq < below`` (``below`` None:
        above the newest; ``floor`` is ``below - span``) that have no vector of ``model``,
        newest first, at most ``limit``; and ``floor``. The cost follows ``span``, not the
        channel's length."""

    async def put_embeddings(
        self, key: ChannelKey, model: str, items: Sequence[tuple[Turn, bytes]]
    ) -> int:
        """Store each turn's packed vector (``pack``) unless the turn is gone or its text
        changed since it was read; replaces an older vector of the same model. How many
        were stored."""

    async def nearest_turns(
        self, key: ChannelKey, model: str, query: bytes, *, before_seq: int, limit: int
    ) -> list[Turn]:
        """The channel's turns with ``seq < before_seq`` whose ``model`` vectors are the
        closest to ``query`` (cosine), best first, among the newest ``MAX_SCAN`` vectors;
        none when the closest does not stand out (``nearest``)."""

    async def embedding_count(self, key: ChannelKey, model: str) -> int:
        """How many of the channel's turns have a vector of ``model``."""
