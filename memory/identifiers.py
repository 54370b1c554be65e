"""Identifiers a summary must not lose, and where they came from.

A summary may paraphrase, but an order number, a ticket id, an amount, a URL or a code name
is useless unless it is copied exactly, so the summarizer checks each one against the new
summary (DESIGN.md, "Memory semantics" 6). Everything here works on text without spaces
(Korean, Japanese): boundaries are "no ASCII letter, digit or underscore next to it", never
``\\b``, because CJK characters count as word characters and ``ORD-7731로`` must still yield
``ORD-7731``. Nothing assumes capital letters.

What counts as an identifier (each found as a whole, the longest match wins):

* URLs (``http(s)://``, ``ftp://``, ``www.``) and e-mail addresses;
* ``backticked code names`` (the inner text is the identifier);
* ticket ids: ``ORD-1042``, ``JIRA-123``, ``ORD-2024-0042``, ``INC0012345``, ``#4411``;
* hex commit-ish strings of 7-40 characters that contain a digit (``a1b2c3d``), UUIDs;
* dashed or slashed digit groups with 3+ digits: phone numbers ``010-1234-5678``, dates;
* numbers with 3+ digits or with separators: ``1042``, ``3.14``, ``12,500`` (``$120.50``
  keeps ``120.50``).
"""

from __future__ import annotations

import re

__all__ = ["contains_identifier", "context_for", "extract_identifiers", "split_sentences"]

_NW = r"(?<![A-Za-z0-9_])"  # not preceded by an ASCII word character
_NE = r"(?![A-Za-z0-9_])"  # not followed by one
# Scheme case-insensitive only: IGNORECASE on the class would exclude i, s, k (they fold to
# dotless i, long s and the Kelvin sign, which lie in the non-ASCII range).
_URL = re.compile(
    r"(?<![A-Za-z0-9_])(?P<scheme>(?i:(?:https?|ftp)://|www\.))[^\s<>\"'`|\x7f-\U0010ffff]+"
)
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
    r"(?![A-Za-z0-9_-])"
)
# Every identifier kind contains a digit, "@", a backtick, "://" or "www.".
_MAY_HAVE_ID = re.compile(r"[0-9@`]|://|www\.", re.IGNORECASE)
_BACKTICK = re.compile(r"(?<!`)`([^`\n]{1,100})`(?!`)")
_PATTERNS = [
    re.compile(_NW + r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}" + _NE),  # UUID
    re.compile(_NW + r"[A-Za-z][A-Za-z0-9]{0,15}(?:[-_][A-Za-z0-9]+)*[-_][0-9]{2,}" + _NE),
    re.compile(_NW + r"[A-Za-z]{1,10}[0-9]{3,}" + _NE),  # INC0012345
    re.compile(r"(?<![&A-Za-z0-9_])#[0-9]{2,}(?![0-9])"),  # #4411
    re.compile(_NW + r"(?=[A-Fa-f]*[0-9])[0-9A-Fa-f]{7,40}" + _NE),  # commit-ish
    re.compile(r"(?<![A-Za-z0-9_./-])\+?[0-9]+(?:[-/][0-9]+)+(?![0-9])"),  # phone, date
    re.compile(
        r"(?<![A-Za-z0-9_.])(?:[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)+"
        r"|[0-9]{3,})(?![0-9])"
    ),
]
_URL_TAIL = ".,;:!?*"
_LETTER = re.compile(r"[A-Za-z_]")
_BULLET = re.compile(r"^(?:[-*•]|#+)\s+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])(?![。！？])\s*|\s*\n\s*")


def _strip_url(url: str) -> str:
    """Drop sentence punctuation after a URL, and a closing bracket it did not open."""
    while url:
        last = url[-1]
        unopened = last in ")]" and url.count(last) > url.count("(" if last == ")" else "[")
        if last not in _URL_TAIL and not unopened:
            break
        url = url[:-1]
    return url


def _candidates(text: str) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    for m in _URL.finditer(text):
        url = _strip_url(m.group())
        if len(url) > len(m.group("scheme")):
            found.append((m.start(), m.start() + len(url), url))
    found.extend((m.start(), m.end(), m.group()) for m in _EMAIL.finditer(text))
    for m in _BACKTICK.finditer(text):
        if m.group(1).strip():
            found.append((m.start(), m.end(), " ".join(m.group(1).split())))
    for pattern in _PATTERNS:
        for m in pattern.finditer(text):
            value = m.group()
            # "1-2" or "3/4" is prose, not an id: dashed digit groups need 3+ digits.
            if value[0] in "+0123456789" and sum(c.isdigit() for c in value) < 3:
                continue
            found.append((m.start(), m.end(), value))
    return found


def _is_caseless(ident: str) -> bool:
    """URLs and e-mail addresses compare case-insensitively; nothing else does."""
    return bool(_URL.match(ident) or _EMAIL.fullmatch(ident))


def _key(ident: str) -> str:
    return ident.translate(_ASCII_LOWER) if _is_caseless(ident) else ident


def extract_identifiers(text: str) -> list[str]:
    """Identifiers in ``text``, in order of first appearance, without duplicates.

    Overlapping matches resolve to the longest (a URL wins over the number inside it).
    """
    if not _MAY_HAVE_ID.search(text):  # most chat lines: skip the dozen patterns
        return []
    taken: list[tuple[int, int, str]] = []
    for start, end, value in sorted(_candidates(text), key=lambda c: (c[0] - c[1], c[0])):
        if all(end <= s or start >= e for s, e, _ in taken):
            taken.append((start, end, value))
    seen: set[str] = set()
    result: list[str] = []
    for _, _, value in sorted(taken):
        if _key(value) not in seen:
            seen.add(_key(value))
            result.append(value)
    return result


def _variants(ident: str) -> list[str]:
    """Spellings that count as the same identifier: numbers with or without thousand commas."""
    if _GROUPED.fullmatch(ident):
        return [ident, ident.replace(",", "")]
    if ident.isascii() and ident.isdigit() and len(ident) > 3 and not ident.startswith("0"):
        return [ident, f"{int(ident):,}"]
    return [ident]


def _glued(a: str, b: str) -> bool:
    """Whether two adjacent characters belong to one token: digit-digit or letter-letter."""
    if a.isascii() and b.isascii():
        return (a.isdigit() and b.isdigit()) or (_LETTER.match(a) and _LETTER.match(b)) is not None
    return False


def _find(haystack: str, needle: str) -> int:
    """Index of ``needle`` in ``haystack`` not continuing a run of digits or letters, or -1."""
    start = haystack.find(needle) if needle else -1
    while start >= 0:
        end = start + len(needle)
        glued_left = start > 0 and _glued(haystack[start - 1], needle[0])
        glued_right = end < len(haystack) and _glued(needle[-1], haystack[end])
        if not glued_left and not glued_right:
            return start
        start = haystack.find(needle, start + 1)
    return -1


def _locate(haystack: str, ident: str) -> int:
    """Where ``ident`` occurs in whitespace-normalised ``haystack`` (see contains_identifier)."""
    text = " ".join(haystack.split())
    needle = " ".join(ident.split())
    if _is_caseless(needle):  # ASCII-only lowering keeps indices stable
        text, needle = text.translate(_ASCII_LOWER), needle.translate(_ASCII_LOWER)
    hits = [i for i in (_find(text, v) for v in _variants(needle)) if i >= 0]
    return min(hits, default=-1)


def contains_identifier(haystack: str, ident: str) -> bool:
    """Whether ``haystack`` mentions ``ident`` verbatim.

    Whitespace runs compare equal; URLs and e-mails ignore case; a number also matches with
    its thousand separators removed (``12,500`` ~ ``12500``) or added. ``1042`` is not found
    inside ``10423`` nor ``cfg`` inside ``cfgs``: a match may not continue a run of ASCII
    digits or letters (``500`` is found in ``500GB``).
    """
    return _locate(haystack, ident) >= 0


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: ends at ``. ! ?`` before whitespace, at ``。！？`` and at newlines.

    A dot inside ``3.14`` or ``example.com`` is not an end, since no space follows it.
    """
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def context_for(ident: str, text: str, max_chars: int = 160) -> str:
    """The sentence of ``text`` that mentions ``ident``, cut to ``max_chars`` around it.

    Facts carry this so a reader knows what the bare identifier referred to. Returns ``""``
    when ``text`` does not mention ``ident``.
    """
    for raw in [*split_sentences(text), text]:  # the whole text if it spans sentences
        sentence = " ".join(raw.split())
        unbulleted = _BULLET.sub("", sentence)  # a summary line's "- " or "## "
        sentence = unbulleted if _locate(unbulleted, ident) >= 0 else sentence
        pos = _locate(sentence, ident)
        if pos < 0:
            continue
        if len(sentence) <= max_chars:
            return sentence
        width = max(1, max_chars - 2)  # room for an ellipsis on each side
        start = max(0, min(pos - (width - len(ident)) // 2, len(sentence) - width))
        window = sentence[start : start + width]
        head = "…" if start else ""
        tail = "…" if start + width < len(sentence) else ""
        return head + window + tail
    return ""
