"""Identifier extraction, matching and context: what a summary must keep verbatim."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.identifiers import (
    contains_identifier,
    context_for,
    extract_identifiers,
    split_sentences,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("order 1042 arrived", ["1042"]),
        ("pi is 3.14 and we owe 12,500 won", ["12,500 won"]),  # a decimal alone is not one
        ("total $120.50 due", ["$120.50"]),  # money keeps its currency
        ("see ORD-1042 and JIRA-123", ["ORD-1042", "JIRA-123"]),
        ("issue #4411 and INC0012345", ["#4411", "INC0012345"]),
        ("fixed in a1b2c3d, see ORD-2024-0042", ["a1b2c3d", "ORD-2024-0042"]),
        ("docs at https://example.com/a?b=1.", ["https://example.com/a?b=1"]),
        (
            "(see https://en.wikipedia.org/wiki/Foo_(bar))",
            ["https://en.wikipedia.org/wiki/Foo_(bar)"],
        ),
        ("local http://localhost:8080/x now", ["http://localhost:8080/x"]),
        ("mail bob.k@example.com, please", ["bob.k@example.com"]),
        ("call `parse_config` then `make  test`", ["parse_config", "make test"]),
        ("주문번호 ORD-7731로 환불해 주세요", ["ORD-7731"]),
        ("注文番号は48213です", ["48213"]),
        ("연락처는 010-1234-5678입니다", ["010-1234-5678"]),
        ("금액은 12,500원이고 링크는 https://ex.com/p입니다", ["12,500원", "https://ex.com/p"]),
        ("lowercase ord-55 and inc0042", ["ord-55", "inc0042"]),
        ("release on 2024-05-01", ["2024-05-01"]),
    ],
)
def test_extracts_identifiers(text: str, expected: list[str]) -> None:
    assert extract_identifiers(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I have 2 cats and 12 dogs",
        "pages 1-2, about 3/4 of it",
        "deadbeef feedback accepted",  # hex-looking words without a digit
        "gpt-4o is nice, v2 too",
        "ㅋㅋ 네 알겠습니다",
        "",
    ],
)
def test_ordinary_text_has_no_identifiers(text: str) -> None:
    assert extract_identifiers(text) == []


def test_order_of_appearance_and_no_duplicates() -> None:
    text = (
        "ORD-1 no; ORD-22 then order 1042, again ORD-22 and HTTPS://X.com/a and https://x.com/a"
    )
    assert extract_identifiers(text) == ["ORD-22", "1042", "HTTPS://X.com/a"]


def test_longest_match_wins_over_parts() -> None:
    assert extract_identifiers("https://shop.example.com/orders/10423") == [
        "https://shop.example.com/orders/10423"
    ]
    assert extract_identifiers("user42@example.com") == ["user42@example.com"]


@pytest.mark.parametrize(
    ("haystack", "ident", "found"),
    [
        ("order ORD-1042 shipped", "ORD-1042", True),
        ("order ord-1042 shipped", "ORD-1042", False),  # ids are case-sensitive
        ("see HTTPS://Example.COM/a", "https://example.com/a", True),
        ("write to BOB@Example.com", "bob@example.com", True),
        ("ticket 10423", "1042", False),  # not a prefix of a longer number
        ("ticket 21042", "1042", False),
        ("the total is 12500 won", "12,500", True),
        ("the total is 12,500 won", "12500", True),
        ("the total is 12 500 won", "12,500", False),
        ("run `make\n  test`", "make test", True),
        ("ORD-7731로 환불", "ORD-7731", True),
        ("see #4411.", "#4411", True),
        ("see #44110", "#4411", False),
    ],
)
def test_contains_identifier(haystack: str, ident: str, found: bool) -> None:
    assert contains_identifier(haystack, ident) is found


def test_split_sentences_is_cjk_aware() -> None:
    text = (
        "안녕하세요. 주문번호는 ORD-7731입니다!\n注文番号は48213です。よろしく？ "
        "pi is 3.14 at x.com"
    )
    assert split_sentences(text) == [
        "안녕하세요.",
        "주문번호는 ORD-7731입니다!",
        "注文番号は48213です。",
        "よろしく？",
        "pi is 3.14 at x.com",
    ]


def test_context_for_returns_the_sentence() -> None:
    text = "Hello there. My order ORD-1042 is late! Thanks."
    assert context_for("ORD-1042", text) == "My order ORD-1042 is late!"
    japanese = "こんにちは。注文番号は48213です。よろしく"
    assert context_for("48213", japanese) == "注文番号は48213です。"
    assert context_for("ORD-9", text) == ""


def test_context_for_cuts_long_sentences_around_the_identifier() -> None:
    text = "x" * 300 + " ORD-7731 " + "y" * 300
    ctx = context_for("ORD-7731", text, max_chars=40)
    assert len(ctx) <= 40
    assert "ORD-7731" in ctx
    assert ctx.startswith("…") and ctx.endswith("…")


_PIECES = st.sampled_from(
    [
        "ORD-7731",
        "1042",
        "12,500",
        "3.14",
        "#4411",
        "a1b2c3d",
        "https://ex.com/x",
        "b@ex.com",
        "`cfg_name`",
        "010-1234-5678",
        "주문",
        "번호",
        "로",
        "です",
        "。",
        ". ",
        " ",
        "\n",
        "x",
        "?",
    ]
)


@given(st.lists(st.one_of(_PIECES, st.text(max_size=8)), max_size=12).map("".join))
def test_every_extracted_identifier_is_found_in_its_text(text: str) -> None:
    idents = extract_identifiers(text)
    assert len(idents) == len(set(idents))
    for ident in idents:
        assert contains_identifier(text, ident), (ident, text)
        assert context_for(ident, text), (ident, text)
        assert ident.strip() == ident and ident


@given(
    st.sampled_from(["ORD-7731", "48213", "010-1234-5678", "https://ex.com/p"]),
    st.text(alphabet="가나다라마바사주문번호로요です注文は。", max_size=10),
    st.text(alphabet="가나다라마바사주문번호로요です注文は。", max_size=10),
)
def test_identifiers_survive_cjk_neighbours(ident: str, before: str, after: str) -> None:
    assert ident in extract_identifiers(before + ident + after)
