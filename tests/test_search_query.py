"""What a reply's turn search asks for: the message's words without mentions and without
the bot's own names (``memory.recall.asked``), so "@gistbot when is the retro?" is about
the retro and not about every message that ever addressed the bot."""

from __future__ import annotations

from memory.models import ChannelKey, Turn
from memory.recall import recall_query, turn_fallback_query, turn_query
from memory.tokens import TokenCounter

KEY = ChannelKey("slack", "T1", "C1")
TOK = TokenCounter("gpt-4o")


def _turn(seq: int, text: str, role: str = "user", name: str = "Ana") -> Turn:
    return Turn(KEY, seq, f"m{seq}", role, name.lower(), name, text,  # type: ignore[arg-type]
                TOK.count(text), 0.0)


def test_queries_leave_out_mentions_and_the_bots_names() -> None:
    turns = [_turn(1, "Sure, noted.", "assistant", "Gistbot"),
             _turn(2, "@\u2060Gistbot gistbot when is the retro with @Bob? mail ana@x.org")]
    for query in (turn_query(turns), recall_query(turns), turn_fallback_query(turns)):
        assert "gistbot" not in query and "bob" not in query, query
        assert "retro" in query
    assert "org" in turn_query(turns)  # an address is no mention

