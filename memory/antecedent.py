"""Whether a message leans on the one before it: "She fractured her wrist" names no one.

A recalled message that opens with a pronoun ("she", "they", "his" …) or a bare answer
("yes", "yeah", "no") says who or what it is about only through the message before it
("How's Roz doing?"). When that message is a question, recall shows it with the answer
(``memory.view``), or the model reads a fact without its subject. English and Korean
openers; a message in another language is never glued, which costs nothing but the
context. The other way round, a question about someone ("Has anyone heard from Bart?") is
shown with the reply after it that speaks of a "he" or "she" (``answers_about``), even deep
inside a longer message ("Freddie, did he ever send you …").
"""

from __future__ import annotations

import re

from memory.models import Turn

__all__ = ["answers_about", "asks", "refers_back"]

_OPENERS = frozenset(
    "he she they him her them his hers their theirs it its that this those these yes yeah "
    "yep no nope nah sure true exactly same".split()
)
_KOREAN = ("그녀", "그는", "그가", "그의", "걔", "그게", "그거", "그건", "응", "맞아")
_FIRST = re.compile(r"[^\W\d_]+")
_THIRD = re.compile(r"\b(?:he|she|him|his|her|hers)\b|그녀|그는|그가|그의|걔", re.IGNORECASE)


def refers_back(text: str) -> bool:
    """Whether ``text`` opens with a word that points at the message before it."""
    start = text.lstrip()
    if start.startswith(_KOREAN):
        return True
    m = _FIRST.match(start)
    return m is not None and m.group().casefold() in _OPENERS


def asks(text: str) -> bool:
    """Whether ``text`` ends with a question ("How's Roz doing?"): a reply that leans on it
    ("She broke her wrist") is its answer. Only then is the question shown with it: a
    pronoun after a statement usually continues a story the match already tells, and in a
    small recall room the extra line would displace a match."""
    return text.rstrip().endswith(("?", "？"))


def answers_about(reply: Turn, question: Turn) -> bool:
    """Whether ``reply``, said right after ``question`` (a message that ``asks``), may be
    its answer about someone: another person said it, and it speaks of a "he" or a "she"
    (English; Korean 그녀, 그는 …). A reply naming no one by pronoun is shown only when it
    matches on its own: in a small recall room every extra line displaces a match."""
    return reply.author_id != question.author_id and _THIRD.search(reply.text) is not None
