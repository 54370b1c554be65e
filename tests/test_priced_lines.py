"""Recalled lines priced once across views (``memory.priced_lines``): the same line and cost
as pricing it afresh, a turn priced again only when what its line is made of changed."""

from __future__ import annotations

from dataclasses import replace

from memory.models import ChannelKey, Turn
from memory.priced_lines import CHARS, priced
from memory.recall import recalled_turn_line
from memory.text import defuse
from memory.tokens import TokenCounter

KEY = ChannelKey("slack", "T1", "C1")
DAY = 1_715_990_400.0  # 18 May 2024, a Saturday


class Counting(TokenCounter):
    """A tokenizer that remembers what it was asked to count."""

    def __init__(self) -> None:
        super().__init__("gpt-4o")
        self.asked: list[str] = []

    def count(self, text: str) -> int:
        self.asked.append(text)
        return super().count(text)


def turn(text: str, seq: int = 7) -> Turn:
    return Turn(KEY, seq, f"m{seq}", "user", "u1", "Dana", text, TokenCounter().count(text),
                DAY)


def fresh(t: Turn, tok: TokenCounter) -> tuple[str, int]:
    line = recalled_turn_line(t)
    return line, tok.count(defuse(line) + "\n")


def test_a_line_is_what_pricing_it_afresh_gives() -> None:
    tok = Counting()
    for text in ("my car got towed yesterday   and  <<<again>>>", "plain words here"):
        t = turn(text)
        cut, line, cost = priced(t, 200, tok, " ".join(text.split()))
        assert cut is t
        assert (line, cost) == fresh(t, tok)
    assert "(yesterday = 17 May)" in priced(turn("towed yesterday"), 200, tok,
                                            "towed yesterday")[1]


def test_a_turn_weighed_again_is_not_counted_again() -> None:
    tok = Counting()
    t = turn("the depot sent the parcels north on the early train")
    first = priced(t, 200, tok, t.text)
    asked = len(tok.asked)
    assert asked > 0
    again = replace(t)  # the next view reads the same turn again: another object
    assert priced(again, 200, tok, again.text)[1:] == first[1:]
    assert len(tok.asked) == asked


def test_an_edited_turn_is_priced_anew() -> None:
    tok = Counting()
    t = turn("the meeting is on Tuesday")
    priced(t, 200, tok, t.text)
    edited = replace(t, text="the meeting moved to Thursday")
    _, line, cost = priced(edited, 200, tok, edited.text)
    assert "Thursday" in line and (line, cost) == fresh(edited, tok)


def test_a_long_turn_is_cut_and_a_very_long_one_not_kept() -> None:
    tok = Counting()
    long = turn("word " * 600)
    cut, line, _ = priced(long, 50, tok, " ".join(long.text.split()))
    assert cut is not long and cut.tokens <= 50 and cut.text in line
    huge = turn("x" * (CHARS + 1))
    priced(huge, 200, tok, huge.text)
    asked = len(tok.asked)
    priced(huge, 200, tok, huge.text)
    assert len(tok.asked) > asked  # priced each time: the cache keeps short texts only


def test_whether_a_text_holds_a_relative_date_is_asked_once(monkeypatch) -> None:
    # The prompt renders the recalled lines a view priced: the pattern's search (tens of
    # microseconds a line) is not run again for a text it was run on.
    import memory.relative_dates as rd

    real = rd._PHRASE
    searched: list[str] = []

    class Counting:
        def search(self, text: str) -> object:
            searched.append(text)
            return real.search(text)

        def finditer(self, text: str) -> object:
            return real.finditer(text)

    monkeypatch.setattr(rd, "_PHRASE", Counting())
    for text in ("the van broke down two days ago at the depot", "nothing relative at all"):
        first = rd.dated(text, DAY)
        assert rd.dated(text, DAY + 3 * 86400) != first or not first
        assert rd.dated(text, DAY) == first
    van = "the van broke down two days ago at the depot"
    assert rd.dated(van, DAY) == " (two days ago = 16 May)"
    # Once for the van; never for a plain ASCII text with no word a phrase needs
    # (docs/decisions/0055).
    assert searched == [van]
