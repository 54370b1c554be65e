"""Search terms for the archive (episodes and channel facts), the same on every store.

Both stores index and query *terms*, not raw text: lower-cased runs of letters and digits,
and for Chinese, Japanese and Korean (written without spaces, with particles glued to
words) overlapping character bigrams, so "마감" finds "마감은" and "締切" finds "締切日".
SQLite's FTS5 ``unicode61`` tokenizer and PostgreSQL's ``to_tsvector('simple', …)`` then
see space-separated tokens they do not split further, so BM25 / ``ts_rank`` work on the
same units everywhere. The turn index also stems English words (FTS5's ``porter``,
PostgreSQL's ``gistbot_stem``), in the index and in the query alike. (FTS5's
``trigram`` tokenizer cannot match a two-syllable Korean word, the most common query
length, hence bigrams.)
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["MAX_QUERY_TERMS", "STOP_OR_SHORT", "cached_term_set", "content_terms", "query_terms",
           "term_set", "terms"]

MAX_QUERY_TERMS = 32
"""Most distinct terms one query uses: bounds the cost of a long message's OR query."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_IS_CJK = re.compile(rf"[{_CJK}]")
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")
"""``_TOKEN`` on a lowercased ASCII text: the same runs, found in half the time."""
# Words that match nearly everything; an OR query over them would recall noise.
_STOP = frozenset(
    "a an and are as at be been but by can could did do does for from had has have he her "
    "him his how i if in into is it its me my no not of on or our she so than that the their "
    "them then there these they this to up us was we were what when where which who why will "
    "with would you your about any just also".split()
)


def _tokens(text: str) -> Iterable[str]:
    if text.isascii():  # no CJK: the runs are the terms
        return _ASCII_TOKEN.findall(text.lower())
    folded = text.casefold()
    if not _IS_CJK.search(folded):  # "’", "—", "é": still no CJK, found in one C call
        return _TOKEN.findall(folded)
    return _mixed_tokens(text)


def _mixed_tokens(text: str) -> Iterable[str]:
    for run in _TOKEN.findall(text.casefold()):
        if _IS_CJK.match(run):
            if len(run) == 1:
                yield run
            else:
                yield from (run[i : i + 2] for i in range(len(run) - 1))
        else:
            yield run


def terms(text: str) -> str:
    """The indexed form of ``text``: its terms, space-separated (duplicates kept for BM25)."""
    return " ".join(_tokens(text))


def term_set(text: str) -> frozenset[str]:
    """The distinct terms of ``text`` (``terms``'s, as a set). An ASCII text holds no CJK,
    so its terms are the pattern's runs, found in one C call instead of a Python step per
    term: the ranking asks this of every candidate, new ones each reply in a very long
    channel (docs/decisions/0055)."""
    if text.isascii():
        return frozenset(_ASCII_TOKEN.findall(text.lower()))
    return frozenset(_tokens(text))


@lru_cache(maxsize=8192)
def cached_term_set(text: str) -> frozenset[str]:
    """``term_set`` remembered for the 8,192 texts asked last: a reply's ranking asks it of
    every candidate twice (``ranking``'s rarest word, ``together``'s rare words), and the
    next reply asks it of mostly the same candidates again."""
    return term_set(text)


def query_terms(*texts: str, common: bool = False) -> list[str]:
    """Distinct, non-stopword terms of ``texts`` in order of appearance, at most
    ``MAX_QUERY_TERMS``: the first text (the triggering message) gets first pick. With
    ``common``, the stopwords too (a ranking that weighs terms by rarity can use them)."""
    out: dict[str, None] = {}
    for text in texts:
        for tok in _tokens(text):
            if (tok in _STOP and not common) or (len(tok) < 2 and not _IS_CJK.match(tok)):
                continue
            out[tok] = None
            if len(out) >= MAX_QUERY_TERMS:
                return list(out)
    return list(out)


STOP_OR_SHORT = _STOP | frozenset(string.ascii_lowercase + string.digits)
"""What ``content_terms`` drops of an ASCII text's terms: the stopwords and the one-character
terms (an ASCII text's terms are runs of lowercase letters and digits)."""


def content_terms(text: str) -> set[str]:
    """Every distinct non-stopword term of ``text`` (no ``MAX_QUERY_TERMS`` cap). An ASCII
    text's in C-level set operations, not a Python step per term: the ranking asks this of
    every candidate, new ones each reply in a very long channel (docs/decisions/0056)."""
    if text.isascii():
        return set(_ASCII_TOKEN.findall(text.lower())) - STOP_OR_SHORT
    return {t for t in _tokens(text)
            if t not in _STOP and (len(t) >= 2 or _IS_CJK.match(t))}
