"""Token counting that works offline.

tiktoken downloads its encoding files on first use, which fails without internet. gistbot
ships ``o200k_base`` and ``cl100k_base`` itself, gzipped, in ``memory/encodings/`` (the one
source: see its README); we unpack them into tiktoken's cache once (file name = sha1 of the
URL tiktoken would download; content checked against tiktoken's sha256), then tiktoken never
touches the network.

Which encoding: ``o200k_base`` for current OpenAI models (gpt-4o, gpt-4.1, gpt-5, o-series),
``cl100k_base`` for gpt-4/gpt-3.5 and text-embedding-3. Unknown models (Llama, Qwen,
Mistral, … behind Ollama or vLLM) are counted with ``o200k_base`` times 1.1, rounded up:
their tokenizers are within ~10% of o200k on English, and over-counting keeps prompts
inside the budget rather than over it. CJK text is counted by the same BPE (no whitespace
assumption).
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import threading
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Protocol

__all__ = ["TokenCounter", "Tokenizer", "encoding_for_model", "ensure_offline_encodings"]

_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
_CL100K_PREFIXES = ("gpt-4-", "gpt-3.5", "text-embedding-3", "text-embedding-ada")
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
UNKNOWN_MODEL_FACTOR = 1.1
_lock = threading.Lock()


class Tokenizer(Protocol):
    """Counts and cuts text in tokens."""

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


def _cache_dir() -> Path:
    env = os.environ.get("TIKTOKEN_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gistbot" / "tiktoken"


def ensure_offline_encodings() -> Path:
    """Unpack the shipped encodings into tiktoken's cache and point tiktoken at it.

    Idempotent and cheap after the first call. Returns the cache directory.
    """
    with _lock:
        cache = _cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        for name, url in _URLS.items():
            target = cache / hashlib.sha1(url.encode()).hexdigest()
            if target.exists():
                continue
            packed = resources.files("memory").joinpath(f"encodings/{name}.tiktoken.gz")
            data = gzip.decompress(packed.read_bytes())
            if hashlib.sha256(data).hexdigest() != _SHA256[name]:
                raise RuntimeError(f"bundled {name} encoding does not match tiktoken's hash")
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))
        return cache


def encoding_for_model(model: str) -> tuple[str, float]:
    """(encoding name, factor) for a model name; see the module docstring."""
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base", 1.0
    if name == "gpt-4" or name.startswith(_CL100K_PREFIXES):
        return "cl100k_base", 1.0
    return "o200k_base", UNKNOWN_MODEL_FACTOR


COUNT_CACHE_SIZE = 8192
"""Texts whose counts one ``TokenCounter`` remembers (least recently used dropped)."""
COUNT_CACHE_CHARS = 1024
"""Longer texts go to the small cache below: this one holds at most ~8 MiB of text."""
LONG_CACHE_SIZE = 16
"""Longer texts whose counts are remembered: a channel's rolling summary is counted by every
reply's view (twice: once to place the verbatim turns, once to compose) and changes only
when a compaction commits (docs/decisions/0016)."""
LONG_CACHE_CHARS = 32_768
"""Texts longer than this are counted each time: the long cache holds at most ~2 MiB."""


@lru_cache(maxsize=4)
def _encoding(name: str) -> object:
    ensure_offline_encodings()
    import tiktoken

    return tiktoken.get_encoding(name)


class TokenCounter:
    """tiktoken-backed ``Tokenizer`` for one model. Thread-safe; encodings are shared."""

    def __init__(self, model: str = "gpt-4o") -> None:
        self.model = model
        self.encoding_name, self.factor = encoding_for_model(model)
        self._enc = _encoding(self.encoding_name)
        # A reply's view prices the same recalled lines, facts and headings as the reply
        # before it (~300 candidate lines a view; docs/decisions/0016).
        self._cached = lru_cache(maxsize=COUNT_CACHE_SIZE)(self._count)
        self._cached_long = lru_cache(maxsize=LONG_CACHE_SIZE)(self._count)

    def count(self, text: str) -> int:
        """Tokens in ``text`` (0 for empty), scaled up for unknown models. Short texts are
        remembered (``COUNT_CACHE_SIZE`` of them, up to ``COUNT_CACHE_CHARS`` long), and a
        few longer ones (``LONG_CACHE_SIZE``, up to ``LONG_CACHE_CHARS``: summaries)."""
        if not text:
            return 0
        if len(text) <= COUNT_CACHE_CHARS:
            return self._cached(text)
        if len(text) <= LONG_CACHE_CHARS:
            return self._cached_long(text)
        return self._count(text)

    def _count(self, text: str) -> int:
        n = len(self._enc.encode(text, disallowed_special=()))  # type: ignore[attr-defined]
        return n if self.factor == 1.0 else math.ceil(n * self.factor)

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that counts at most ``max_tokens``."""
        if max_tokens <= 0:
            return ""
        if self.count(text) <= max_tokens:
            return text
        raw_budget = int(max_tokens / self.factor)
        ids = self._enc.encode(text, disallowed_special=())  # type: ignore[attr-defined]
        cut: str = self._enc.decode(ids[:raw_budget])  # type: ignore[attr-defined]
        # A cut inside a multi-byte character decodes to U+FFFD; drop it.
        return cut.rstrip("\ufffd")
