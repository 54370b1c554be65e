"""Recalled lines priced once, not once a view: what a turn's recalled line says and costs.

A reply's view weighs a few hundred candidate turns, and the next reply in the channel
weighs mostly the same ones again: each turn's line (its whitespace folded, cut to the
longest a recalled turn may be, the meaning of its relative dates appended) and that
line's token count depend only on the turn and the tokenizer. ``priced`` keeps them, per
tokenizer, for the ``SIZE`` turns priced last (least recently used dropped first). The key
is everything the line is made of, the text included: an edited turn is priced anew.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from weakref import WeakKeyDictionary

from memory.models import Turn
from memory.recall import recalled_line, recalled_turn_line
from memory.relative_dates import dated
from memory.text import defuse
from memory.tokens import Tokenizer
from memory.window import truncate_marked

__all__ = ["CHARS", "SIZE", "line_cost", "priced"]

SIZE = 4096
"""Lines kept per tokenizer: a view weighs ~450 candidates, the next mostly the same."""
CHARS = 2000
"""Turns with a longer text are priced each time: the cache holds a few MiB at most."""

_Key = tuple[str, str, str, float, int, int]
_Value = tuple[str | None, int, str, int]
_CACHES: WeakKeyDictionary[Tokenizer, OrderedDict[_Key, _Value]] = WeakKeyDictionary()


def line_cost(line: str, tokenizer: Tokenizer) -> int:
    """What ``line`` costs in the memory block: defused, with the line break after it,
    counted as one string (the break often merges with the line's last punctuation, ".\n";
    the next line starts with "-" or "#", which never joins a break: tests/test_view_price.py)."""
    return tokenizer.count(defuse(line) + "\n")


def _price(turn: Turn, max_tokens: int, tokenizer: Tokenizer, words: str) -> _Value:
    """(the cut text or None when shown whole, its tokens, the line, the line's cost)."""
    if turn.tokens <= max_tokens:
        line = recalled_line(turn.role, turn.author_name, words) + dated(words, turn.sent_at)
        return None, turn.tokens, line, line_cost(line, tokenizer)
    text = truncate_marked(turn.text, max_tokens, tokenizer)
    cut = replace(turn, text=text, tokens=tokenizer.count(text))
    line = recalled_turn_line(cut)
    return text, cut.tokens, line, line_cost(line, tokenizer)


def priced(turn: Turn, max_tokens: int, tokenizer: Tokenizer, words: str
           ) -> tuple[Turn, str, int]:
    """``turn`` cut to ``max_tokens`` (itself when it fits), its recalled line and the
    line's cost as rendered (defused, with its line break); ``words``: its text with the
    whitespace folded."""
    if len(turn.text) > CHARS:
        return _turn(turn, _price(turn, max_tokens, tokenizer, words))
    try:
        cache = _CACHES.get(tokenizer)
        if cache is None:
            cache = _CACHES[tokenizer] = OrderedDict()
    except TypeError:  # a tokenizer that cannot be weakly referenced or hashed
        cache = OrderedDict()
    key = (turn.role, turn.author_name, turn.text, turn.sent_at, turn.tokens, max_tokens)
    value = cache.get(key)
    if value is None:
        value = cache[key] = _price(turn, max_tokens, tokenizer, words)
        if len(cache) > SIZE:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return _turn(turn, value)


def _turn(turn: Turn, value: _Value) -> tuple[Turn, str, int]:
    text, tokens, line, cost = value
    return (turn if text is None else replace(turn, text=text, tokens=tokens)), line, cost
