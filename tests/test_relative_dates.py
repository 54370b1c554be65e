"""A recalled message's relative dates are resolved against the day it was said
(``memory.relative_dates``): "my car got towed last Tuesday", recalled weeks later, is shown
with the Tuesday it means; the text itself stays as said and the view stays in budget."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from bot.conversation.prompts import build_messages
from memory.models import ChannelKey, Recall, SummaryState, Turn
from memory.relative_dates import _PHRASE, _relative, dated, resolve
from memory.tokens import TokenCounter
from memory.view import ViewSplit, compose_view

KEY = ChannelKey("discord", "g", "c")
TOK = TokenCounter("gpt-4o")
WEDNESDAY = datetime(2024, 5, 15, 20, 30, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("phrase", "day"), [
    ("yesterday", date(2024, 5, 14)), ("the day before yesterday", date(2024, 5, 13)),
    ("three days ago", date(2024, 5, 12)), ("4 days ago", date(2024, 5, 11)),
    ("a week ago", date(2024, 5, 8)), ("two weeks ago", date(2024, 5, 1)),
    ("last Tuesday", date(2024, 5, 14)), ("last Wednesday", date(2024, 5, 8)),
    ("last weekend", date(2024, 5, 11)), ("어제", date(2024, 5, 14)),
    ("그저께", date(2024, 5, 13)), ("3일 전", date(2024, 5, 12)),
])
def test_a_relative_date_means_a_day_before_the_one_it_was_said(phrase: str, day: date) -> None:
    assert resolve(phrase, date(2024, 5, 15)) == day


def test_dated_lists_each_phrase_once_and_leaves_plans_alone() -> None:
    assert dated("Towed last Tuesday, and yesterday the boot broke.", WEDNESDAY) == (
        " (last Tuesday = 14 May; yesterday = 14 May)")
    new_year = datetime(2024, 1, 2, 12, tzinfo=UTC).timestamp()
    assert dated("We met last weekend.", new_year) == " (last weekend = 30 Dec 2023)"
    assert dated("See you on Monday, or next week.", WEDNESDAY) == ""


def test_a_recalled_message_shows_the_day_its_relative_date_means() -> None:
    def turn(seq: int, text: str, at: float) -> Turn:
        return Turn(KEY, seq, f"m{seq}", "user", "u1", "Roz", text, TOK.count(text), at)

    said = "My car got towed last Tuesday, a hundred and sixty quid to get it back."
    old = [turn(1, said, WEDNESDAY)]
    old += [turn(i, f"filler {i}", WEDNESDAY + 60 * i) for i in range(2, 40)]
    new = [turn(40, "when was the car towed?", WEDNESDAY + 40 * 86400)]
    view = compose_view(SummaryState(KEY, folded_through=39), new, budget=400, tokenizer=TOK,
                        split=ViewSplit(), found=Recall((), (), tuple(old[:1])), nearby=old)
    system = str(build_messages("Be brief.", view)[0]["content"])
    assert f"- Roz: {said} (last Tuesday = 14 May)" in system
    assert view.tokens <= 400


@pytest.mark.parametrize("text", [
    "Towed LAST TUESDAY", "YESTERDAY it rained", "Two Days Ago", "a week AGO, roughly",
    "it was blasted three days agone", "the last of the pie", "nothing relative at all",
    "laſt tuesday", "ＬＡＳＴ Tuesday", "어제 비가 왔어", "3일 전에", "agog at the news",
])
def test_the_quick_check_agrees_with_the_pattern(text: str) -> None:
    # The ASCII shortcut (docs/decisions/0055) must say what the pattern says, for every
    # case: upper case, words that only contain a phrase's word, non-ASCII letters that
    # IGNORECASE folds ("ſ" is "s") but lower() does not.
    _relative.cache_clear()
    assert _relative(text) == (_PHRASE.search(text) is not None)
