"""Nicknames learned from the channel: "Roz" in a message is the author "Rosalind".

Friends call each other by short forms; a question asked by someone else names the full
name. The turn index holds each turn's author with its text, so "Rosalind" finds what
Rosalind said but never "Roz's dog finally has a name". ``Aliases`` learns, per channel and
as turns are recorded (no store round trip on the reply path), which words stand for which
author, and ``expand`` adds them to a search's terms (and the full name to a nickname's).

A word is taken for an author's short form when it looks like one (it shares the first two
letters of one of the author's name words, or its first three letters occur in it:
"Bart"/"Bartholomew", "Wendy"/"Gwendolyn") and the channel uses it like one: at least
``MIN_USES`` times, by at least ``MIN_SPEAKERS`` other people, hardly ever by the author
(nobody calls themselves by their nickname; "road" shares "Ro" with "Rosalind" but Rosalind
says it too). Explicit statements teach at once: "call me Roz" (the author's), "Thaddeus (Tad)"
(both ways). No capitalization is assumed: the words are the search's terms (Korean names
are matched by their bigrams already; a Korean short form that is a part of the name is
one of the name's bigrams).

``variants``: anyone's other forms of a capitalised name ("Percy" / "Percival", ``name_variant``).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from memory.models import ChannelKey, Turn
from memory.search_text import MAX_QUERY_TERMS, query_terms

__all__ = ["CAPITALS", "CHANNELS", "MAX_SHORT", "MIN_SPEAKERS", "MIN_USES", "OWN_SHARE",
           "WARM_PAGE", "WARM_TURNS", "Aliases", "ChannelAliases", "name_variant", "opens_sentence",
           "short_form"]

MIN_USES = 5
"""Times others must use a short form before it counts as the author's."""
OWN_SHARE = 0.1
"""The author may use their own short form at most this share of the times others do
("Did Roz ever sort things out?" by Roz herself, quoting)."""
MAX_SHORT = 7
"""Letters of a short form at most: "Freddie", not "holidays" (whose "hol" is in
"Bartholomew")."""
MIN_SPEAKERS = 2
"""Distinct other people who must use it: one person's pet word is not a nickname."""
CHANNELS = 1024
"""Channels whose aliases are kept (least recently recorded dropped first)."""
WARM_TURNS = 20_000
"""Stored turns a channel's aliases are first learned from (the newest), in the background
after a start: a long-running channel's nicknames are in its recent months."""
WARM_PAGE = 500
"""Turns read per store call while warming up."""
LEARN_CHARS = 20_000
"""Characters of a message learned from: a nickname is in a message's words, not in the
rest of a pasted log."""
_PER_NAME = 4
"""Aliases one name expands to at most (the most used first)."""
CAPITALS = 10_000
"""Capitalised words a channel keeps for ``variants`` (names, and words that open a
sentence; the first ones seen are kept)."""

_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"[^\W\d_]+")
_CALL_ME = re.compile(r"\b(?:call me|i go by|i'm called)\s+([^\W\d_]{2,20})", re.IGNORECASE)
# Bounded and anchored at a word's start: on a 1,000,000-letter "word" an unbounded
# ``([^\W\d_]+)\s*\(`` tries every start and every length (quadratic).
_PAREN = re.compile(r"\b([^\W\d_]{2,40})\s*\(([^\W\d_]{2,20})\)")


def short_form(word: str, name: str) -> bool:
    """Whether ``word`` (casefolded) reads as a short form of the name word ``name``."""
    if len(word) < 2 or len(word) >= len(name) or len(word) > MAX_SHORT:
        return False
    if _CJK.match(word):  # a Korean given name without the family name: "민수", "김민수"
        return word in name
    return name.startswith(word[:2]) or (len(word) >= 3 and word[:3] in name)


def opens_sentence(text: str, at: int) -> bool:
    """Whether the word at ``at`` in ``text`` is the first of a sentence (or of the text)."""
    before = text[max(0, at - 40) : at].rstrip(" \t\"'(“‘")
    return not before or before[-1] in ".!?:\n"


def name_variant(a: str, b: str) -> bool:
    """Whether the casefolded words ``a`` and ``b`` read as two forms of one name: the
    shorter (at least three letters) has its first three letters in the longer ("percy" /
    "percival", "gus" / "augustin", "sandy" / "lysander"). Three, not two ("hetty" /
    "henrietta" is missed): in a channel with many names two shared letters join strangers."""
    short, long = sorted((a, b), key=len)
    return 3 <= len(short) < len(long) and short[:3] in long and not _CJK.match(short)


@dataclass
class ChannelAliases:
    """One channel's learning: author name words, short-form use, explicit statements."""

    names: dict[str, str] = field(default_factory=dict)
    """Name word -> author id (a word two authors share belongs to neither)."""
    used: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    """(name word, short form) -> uses by author id."""
    stated: dict[str, set[str]] = field(default_factory=dict)
    """Word -> words stated to be the same person."""
    _table: dict[str, list[str]] | None = field(default=None, repr=False)
    _keys: dict[str, set[str]] = field(default_factory=dict, repr=False)
    """Each two letters in a name word -> the name words: a message's words are checked
    against the few names their first two letters are in (every short form's are), not
    against every author's."""
    capitals: set[str] = field(default_factory=set)
    """Words written capitalised (casefolded), at most ``CAPITALS``."""
    inside: set[str] = field(default_factory=set)
    """Those of ``capitals`` written capitalised inside a sentence too: names, not a
    sentence's first word."""
    _triples: dict[str, set[str]] = field(default_factory=dict, repr=False)
    """Each three letters in a capitalised word -> the words: the longer forms of a name."""

    def learn(self, author_id: str, author_name: str, text: str) -> None:
        """Take in one recorded message by a person."""
        self._table = None
        text = text[:LEARN_CHARS]
        for word in _words(author_name):
            if word not in self.names:
                for i in range(len(word) - 1):
                    self._keys.setdefault(word[i : i + 2], set()).add(word)
            if self.names.setdefault(word, author_id) != author_id:
                self.names[word] = ""
        for word in set(_words(text)):
            for name in self._keys.get(word[:2], ()):
                if short_form(word, name):
                    uses = self.used.setdefault((name, word), {})
                    uses[author_id] = uses.get(author_id, 0) + 1
        self._capitals(text)
        for m in _CALL_ME.finditer(text):
            for name in _words(author_name):
                self._state(name, m.group(1).casefold())
        for m in _PAREN.finditer(text):
            full, short = m.group(1).casefold(), m.group(2).casefold()
            if short_form(short, full):
                self._state(full, short)

    def _capitals(self, text: str) -> None:
        for m in _WORD.finditer(text):
            word = m.group()
            if len(self.capitals) >= CAPITALS:
                return
            if len(word) >= 3 and word[0].isupper():
                folded = word.casefold()
                if not opens_sentence(text, m.start()):
                    self.inside.add(folded)
                if folded not in self.capitals:
                    self.capitals.add(folded)
                    for i in range(len(folded) - 2):
                        self._triples.setdefault(folded[i : i + 3], set()).add(folded)

    def variants(self, word: str) -> list[str]:
        """Other capitalised words of the channel that are forms of the name ``word``
        (``name_variant``), sorted; none unless ``word`` is itself written capitalised."""
        if word not in self.capitals:
            return []
        found = set(self._triples.get(word[:3], ()))  # longer forms
        for i in range(len(word) - 2):  # shorter forms: their first three letters in word
            found.update(w for w in self._triples.get(word[i : i + 3], ())
                         if w.startswith(word[i : i + 3]))
        return sorted(w for w in found if w != word and name_variant(w, word))

    def _state(self, a: str, b: str) -> None:
        if a != b:
            self.stated.setdefault(a, set()).add(b)
            self.stated.setdefault(b, set()).add(a)

    def of(self, word: str) -> list[str]:
        """The words that name the same person as ``word``, most used first."""
        out = dict.fromkeys(sorted(self.stated.get(word, ())))
        out.update(dict.fromkeys(self.table().get(word, ())))
        out.pop(word, None)
        return list(out)[:_PER_NAME]

    def table(self) -> dict[str, list[str]]:
        """Name word -> its nicknames and nickname -> the name words, most used first:
        one pass over the counts, kept until the next message is learned."""
        if self._table is not None:
            return self._table
        found: list[tuple[int, str, str]] = []
        for (name, word), uses in self.used.items():
            owner = self.names.get(name)
            if not owner or word in self.names:
                continue
            own = uses.get(owner, 0)
            total = sum(uses.values()) - own
            if (total >= MIN_USES and len(uses) - (own > 0) >= MIN_SPEAKERS
                    and own <= OWN_SHARE * total):
                found.append((-total, name, word))
        table: dict[str, list[str]] = {}
        for _, name, word in sorted(found):
            table.setdefault(name, []).append(word)
            table.setdefault(word, []).append(name)
        self._table = table
        return table


def _words(text: str) -> Iterable[str]:
    return (w.casefold() for w in _WORD.findall(text))


class Aliases:
    """Per-channel ``ChannelAliases``, bounded to ``CHANNELS`` channels."""

    def __init__(self, channels: int = CHANNELS) -> None:
        self._channels: OrderedDict[ChannelKey, ChannelAliases] = OrderedDict()
        self._limit = channels

    def known(self, key: ChannelKey) -> bool:
        """Whether channel ``key`` is being learned (since a record or a warm-up)."""
        return key in self._channels

    def _channel(self, key: ChannelKey) -> ChannelAliases:
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = ChannelAliases()
            while len(self._channels) > self._limit:
                self._channels.popitem(last=False)
        else:
            self._channels.move_to_end(key)
        return channel

    def learn(self, key: ChannelKey, author_id: str, author_name: str, text: str) -> None:
        """Take in a person's recorded message in channel ``key``."""
        self._channel(key).learn(author_id, author_name, text)

    async def warm(self, key: ChannelKey, below_seq: int,
                   turns_at: Callable[[ChannelKey, Sequence[int]], Awaitable[Sequence[Turn]]]
                   ) -> None:
        """Learn channel ``key`` from its stored turns before ``below_seq`` (the newest
        ``WARM_TURNS``), a page at a time: what was recorded before this process started.
        Run in the background; the replies meanwhile search without the aliases."""
        channel = self._channel(key)
        for start in range(max(1, below_seq - WARM_TURNS), below_seq, WARM_PAGE):
            page = await turns_at(key, range(start, min(start + WARM_PAGE, below_seq)))
            for turn in page:
                if turn.role != "assistant":
                    channel.learn(turn.author_id, turn.author_name, turn.text)

    def named(self, key: ChannelKey, word: str) -> bool:
        """Whether channel ``key`` writes ``word`` (casefolded) capitalised inside a
        sentence: a name, not just a sentence's first word."""
        channel = self._channels.get(key)
        return channel is not None and word in channel.inside

    def variants(self, key: ChannelKey, word: str) -> list[str]:
        """The other forms of the name ``word`` in channel ``key`` (``ChannelAliases.variants``)."""
        channel = self._channels.get(key)
        return [] if channel is None else channel.variants(word)

    def expand(self, key: ChannelKey, query: Sequence[str]) -> list[str]:
        """``query`` with each term's aliases right after it (at most ``MAX_QUERY_TERMS``)."""
        channel = self._channels.get(key)
        if channel is None:
            return list(query)
        out: dict[str, None] = {}
        for term in query:
            out[term] = None
            for alias in channel.of(term):
                out.update(dict.fromkeys(query_terms(alias)))
        return list(out)[: max(MAX_QUERY_TERMS, len(query))]
