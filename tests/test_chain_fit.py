"""The reply chain's share of the prompt (``bot.conversation.chain.fit_chain``): what it
keeps is the near end of the chain, oldest first, and it never costs more than its room,
paid as the memory block renders it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.conversation.chain import Chain, chain_lines, fit_chain
from bot.conversation.prompts import memory_block
from memory.models import ChannelKey, MemoryView, Recall, Turn
from memory.tokens import TokenCounter

TOK = TokenCounter("gpt-4o")
KEY = ChannelKey("discord", "1", "2")
WORDS = st.sampled_from(["bucket", "falcon", "마감은", "金曜日", "🙂", "```", "<<<MEMORY",
                         "the", "x" * 40, "\n"])


def chain_of(texts: list[str]) -> list[Turn]:
    """Turns nearest first, as ``read_chain`` gives them."""
    return [Turn(KEY, i + 1, f"m{i}", "user", "u", f"P{i % 3}", t, TOK.count(t), 0.0)
            for i, t in enumerate(texts)][::-1]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(WORDS, min_size=1, max_size=60).map(" ".join), max_size=12),
       st.integers(0, 1500))
def test_the_chain_keeps_its_near_end_within_its_room(texts: list[str], room: int) -> None:
    nearest_first = chain_of(texts)
    chain = fit_chain(nearest_first, room, TOK)
    assert chain.tokens <= room
    kept = [t.message_id for t in chain.turns]
    assert kept == [t.message_id for t in nearest_first[:len(kept)]][::-1]
    if chain.turns:  # what it paid covers the chain as the memory block shows it
        without = TOK.count(memory_block("", (), Recall()))
        with_chain = TOK.count(memory_block("", (), Recall(), chain.turns))
        assert with_chain - without <= chain.tokens + 2
        assert chain_lines(chain.turns)[0].startswith("## ")


def test_a_chain_message_already_verbatim_is_not_repeated_and_recall_gives_way() -> None:
    a, b, c = chain_of(["first words", "second words", "third words"])[::-1]
    bot = Turn(KEY, 0, "999", "assistant", "b", "gistbot", "here is the plan", 0, 0.0)
    chain = Chain((a, b, bot, c), 40)
    stored_reply = Turn(KEY, 9, "reply:1", "assistant", "b", "gistbot",
                        "here is the plan\nin two steps", 5, 0.0)
    view = MemoryView(KEY, "", 0, (), 0, (c, stored_reply), 0, recall=Recall(turns=(a,)))
    assert chain.without(view).turns == (a, b)  # c verbatim; the bot's reply by its text
    assert chain.without(view).tokens == 40  # paid as it was
    assert chain.unrecalled(view).recall.turns == ()
