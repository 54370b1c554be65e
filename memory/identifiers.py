r"""Identifiers a summary must not lose, and where they came from.

A summary may paraphrase, but an order number, a ticket id, an amount, a URL or a code name
is useless unless copied exactly, so the summarizer checks each against the new summary.
Everything works on text without spaces (Korean, Japanese): a boundary is "no ASCII
letter, digit or underscore next to it", never ``\b`` (``ORD-7731로`` yields ``ORD-7731``).
Nothing assumes capital letters.

An identifier is what a person would need *verbatim* to act on later; each is found whole,
the longest match wins: URLs and e-mail addresses; ``backticked code names``; ids mixing
letters and digits (``ORD-2041``, ``4B-217``, ``INC0012345``; not ``gpt-4o``, ``v2``,
``mp3``); ``#88``; a 3+ digit number after a keyword (order, ticket, issue, 주문, 注文 …);
numbers of 5+ digits; dates, versions, IP addresses and phone numbers; money with its
currency as written (``$120.50``, ``12,500원``); UUIDs and hex commit hashes.

Not identifiers (docs/decisions/0007): bare numbers of up to 4 digits without a keyword or
currency, a year alone, decimals and percentages, times, ranges like ``1-2``. Identifiers
said only by the bot or by gistbot's own prompt are filtered by the summarizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = [
    "contains_identifier",
    "context_for",
    "extract_identifiers",
    "mentioned_in",
    "split_sentences",
]

_NW = r"(?<![A-Za-z0-9_])"  # not preceded by an ASCII word character
_NE = r"(?![A-Za-z0-9_])"  # not followed by one
_NUM_END = r"(?![0-9]|[.,][0-9])"  # a number ends here, not in its decimals or groups
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
_AMOUNT = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?"
_ALNUM = re.compile(_NW + r"(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*" + _NE)
_KEYWORD = (
    r"(?:(?<![A-Za-z])(?i:order|ticket|invoice|case|id|no\.|nr\.|num\.|number|ref|reference"
    r"|issue|pr|bug|build|account|acct|booking|reservation|confirmation|tracking|receipt"
    r"|claim|policy|serial|room)"
    r"|주문|번호|송장|티켓|예약|계좌|접수|사건|문의|이슈|注文|番号|予約|伝票|チケット|口座)"
)
_KEYWORD_TAIL = re.compile(
    _KEYWORD
    + r"(?:\s*(?i:number|no\.|nr\.|num\.)|번호|番号)?"
    + r"(?:\s*[:：]|\s*(?:은|는|이|가|의|을|를|は|が|の|を))?\s*#?\s*$"
)
_KEYWORD_REACH = 40  # characters before a number searched for its keyword
_BARE_NUMBER = re.compile(
    r"(?<![0-9,.])(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{3,})(?![0-9A-Za-z_]|[.,][0-9])"
)


def _gated(pattern: str, gate: str | None = None) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """A pattern, and a cheap one that must occur in the text before it is worth running."""
    return re.compile(pattern), re.compile(gate) if gate is not None else None


_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DAY = r"[0-3]?[0-9](?:st|nd|rd|th)?"
_MONTH_GATE = r"Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_PATTERNS: list[tuple[re.Pattern[str], re.Pattern[str] | None]] = [
    _gated(_NW + r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}" + _NE, "-"),  # UUID
    _gated(r"(?<![&A-Za-z0-9_])#[0-9]{2,}(?![0-9])", "#"),  # #4411
    _gated(_NW + r"(?=[A-Fa-f]*[0-9])[0-9A-Fa-f]{7,40}" + _NE),  # commit-ish
    # Dates: ISO, slashed or dotted with a 4-digit year, Korean, Japanese, English months.
    _gated(r"(?<![0-9.])[0-9]{4}([-/.])[01]?[0-9]\1[0-3]?[0-9]" + _NUM_END, r"[-/.]"),
    _gated(
        r"(?<![0-9./-])[0-3]?[0-9]([-/.])[0-3]?[0-9]\1(?:[0-9]{4}|[0-9]{2})" + _NUM_END, r"[-/.]"
    ),
    _gated(
        r"(?<![0-9])(?:[0-9]{4}\s*[년年]\s*)?[01]?[0-9]\s*[월月]\s*[0-3]?[0-9]\s*[일日]", "[월月]"
    ),
    _gated(r"(?<![0-9])[0-9]{4}\s*[년年]\s*[01]?[0-9]\s*[월月]", "[월月]"),
    _gated(_NW + _MONTH + r"\s+" + _DAY + r"(?:,?\s+[0-9]{4})?" + _NE, _MONTH_GATE),
    _gated(_NW + _DAY + r"\s+" + _MONTH + r"(?:,?\s+[0-9]{4})?" + _NE, _MONTH_GATE),
    # Versions (and IP addresses): v-prefixed with a dot, or three or more dotted parts.
    _gated(
        _NW + r"(?:[vV][0-9]+(?:\.[0-9]+)+|[0-9]+(?:\.[0-9]+){2,})"
        r"(?:[-+][0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?" + _NE + _NUM_END,
        r"\.",
    ),
    # Phone numbers.
    _gated(
        r"(?<![0-9A-Za-z_+])\+[0-9]{1,3}(?:[ .-]?\(?[0-9]{1,4}\)?)(?:[ .-]?[0-9]{2,4}){1,4}"
        + _NUM_END,
        r"\+",
    ),
    _gated(r"(?<![0-9A-Za-z_])\([0-9]{2,4}\)\s?[0-9]{3,4}[-. ][0-9]{4}" + _NUM_END, r"\("),
    _gated(r"(?<![0-9A-Za-z_./-])[0-9]{1,4}(?:-[0-9]{2,4}){2,4}" + _NUM_END, "-"),
    _gated(r"(?<![0-9A-Za-z_./-])[0-9]{3}-[0-9]{4}" + _NUM_END, "-"),
    # Money: a currency before the amount, or a currency word after it.
    _gated(
        r"(?:(?<![A-Za-z0-9_])(?:US|A|C|HK|NZ)?\$|[€£¥₩]|(?<![A-Za-z])(?:USD|EUR|GBP|JPY|KRW|CNY)"
        r"\s?)\s?" + _AMOUNT + _NUM_END,
        r"[$€£¥₩]|USD|EUR|GBP|JPY|KRW|CNY",
    ),
    _gated(
        r"(?<![0-9A-Za-z_.,])" + _AMOUNT
        + r"(?:\s?(?:만원|천원|억원|원|달러|엔|유로|円|万円|ドル|ユーロ|元)"
        r"|\s(?:dollars?|euros?|won|yen|USD|EUR|GBP|JPY|KRW|CNY)" + _NE + ")",
        r"[원円元엔]|달러|유로|ドル|ユーロ|dollar|euro|won|yen|USD|EUR|GBP|JPY|KRW|CNY",
    ),
    # Long numbers: 5+ digits before any decimal point.
    _gated(r"(?<![A-Za-z0-9_.,])" + _AMOUNT + _NUM_END, "[0-9]{5}|,"),
]
_MAX_ID_CHARS = 64
_URL_TAIL = ".,;:!?*"
_LETTER = re.compile(r"[A-Za-z_]")
_BULLET = re.compile(r"^(?:[-*•]|#+)\s+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")
_PLAIN_NUMBER = re.compile(r"(?<![0-9,.])[1-9][0-9]{3,}(?![0-9,]|\.[0-9])")
_CURRENCY = re.compile(r"[$€£¥₩원円元엔]|달러|유로|ドル|(?i:dollar|euro|won|yen|usd|eur|krw|jpy)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])(?![。！？])\s*|\s*\n\s*")


def _alnum_id(value: str) -> str | None:
    """``value`` (or its id part) when it is a letters-and-digits id, else None.

    It needs a letter, and a group of 2+ digits after a dash/underscore or a run of 3+
    digits: ``ORD-55``, ``4B-217``, ``Q-7720-B``, ``INC0042``, not ``gpt-4o`` nor ``ORD-1``.
    A trailing word of 4+ letters is prose, not part of the id (``ORD-2041-refund``).
    """
    groups = re.split(r"([-_])", value)
    while len(groups) > 2 and groups[-1].isalpha() and len(groups[-1]) > 3:
        groups = groups[:-2]
    value = "".join(groups)
    parts = groups[::2]
    if not any(c.isalpha() for c in value) or len(value) > _MAX_ID_CHARS:
        return None
    dashed = len(parts) > 1 and any(p.isdigit() and len(p) >= 2 for p in parts)
    glued = re.search(r"[0-9]{3,}", value) is not None
    return value if dashed or glued else None


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
    for m in _ALNUM.finditer(text):
        if (value := _alnum_id(m.group())) is not None:
            found.append((m.start(), m.start() + len(value), value))
    for m in _BARE_NUMBER.finditer(text):
        if _KEYWORD_TAIL.search(text, max(0, m.start() - _KEYWORD_REACH), m.start()):
            found.append((m.start(), m.end(), m.group()))
    for pattern, gate in _PATTERNS:
        if gate is not None and not gate.search(text):
            continue
        for m in pattern.finditer(text):
            value = " ".join(m.group().split())
            if _plausible(value):
                found.append((m.start(), m.end(), value))
    return found


def _plausible(value: str) -> bool:
    """The digit-count rules a regex cannot say: a bare number needs 5+ digits before its
    decimals, a phone number 7+ digits; a currency makes any amount count."""
    if _CURRENCY.search(value) or value[0] not in "+(0123456789" or _LETTER.search(value):
        return True  # money, an English date, a version
    if re.fullmatch(_AMOUNT, value):
        return sum(c.isdigit() for c in value.split(".")[0]) >= 5
    if re.fullmatch(r"[0-9]+(?:\.[0-9]+){2,}", value) or re.search(r"[년年월月일日]", value):
        return True  # a version or a CJK date
    digits = sum(c.isdigit() for c in value)
    date = re.fullmatch(r"[0-9]{1,4}([-/.])[0-9]{1,2}\1[0-9]{1,4}", value) is not None
    return digits >= 7 or (date and digits >= 6)


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
    """Spellings that count as the same identifier: numbers and amounts with or without
    thousand commas (``12,500`` ~ ``12500``, ``$12,500`` ~ ``$12500``)."""
    if _GROUPED.fullmatch(ident):
        return [ident, ident.replace(",", "")]
    if ident.isascii() and ident.isdigit() and len(ident) > 3 and not ident.startswith("0"):
        return [ident, f"{int(ident):,}"]
    if _CURRENCY.search(ident):
        plain = _GROUPED.sub(lambda m: m.group().replace(",", ""), ident)
        grouped = _PLAIN_NUMBER.sub(lambda m: f"{int(m.group()):,}", ident)
        return list(dict.fromkeys([ident, plain, grouped]))
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


def mentioned_in(haystack: str) -> Callable[[str], bool]:
    """``contains_identifier(haystack, ·)`` for many identifiers: ``haystack`` (a whole fold,
    say) is normalised once instead of once per identifier."""
    text = " ".join(haystack.split())
    low = text.translate(_ASCII_LOWER)

    def check(ident: str) -> bool:
        needle = " ".join(ident.split())
        if _is_caseless(needle):
            return any(_find(low, v) >= 0 for v in _variants(needle.translate(_ASCII_LOWER)))
        return any(_find(text, v) >= 0 for v in _variants(needle))

    return check


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
