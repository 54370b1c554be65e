"""The fused order adjusted for a small room (``memory.together``): texts said again come
after the others, and turns sharing a rare word follow the best turn they hang off."""

from __future__ import annotations

from memory.models import ChannelKey, Turn
from memory.ranking import Weights, rank
from memory.together import RARE, kept_together, said_again_last

KEY = ChannelKey("test", "w1", "together")


def turn(seq: int, text: str, who: str = "Alice", role: str = "user") -> Turn:
    return Turn(key=KEY, seq=seq, message_id=f"m{seq}", role=role, author_id=who.lower(),
                author_name=who, text=text, tokens=len(text.split()), sent_at=1e9 + seq * 60)


def seqs(turns: list[Turn]) -> list[int]:
    return [t.seq for t in turns]


def fillers(start: int, n: int) -> list[Turn]:
    """Distinct chatter that shares only common words with everything."""
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
    return [turn(start + i, f"the weather was grey again, {words[i]}") for i in range(n)]


def test_a_text_said_again_goes_after_the_others_and_before_the_bots() -> None:
    order = [turn(1, "Aw."), turn(2, "aw. ", who="Bob"),
             turn(3, "the bot said this", role="assistant"),
             turn(4, "We named the puppy Mochi"), turn(5, "Aw.", who="Carol")]
    assert seqs(said_again_last(order)) == [4, 1, 2, 5, 3]


def test_rank_puts_a_repeated_reaction_below_a_lower_ranked_statement() -> None:
    hits = [turn(10, "Mad."), turn(20, "Mad."), turn(30, "Alice adopted a beagle called Mochi")]
    question = [turn(1000, "What dog did Alice adopt?", who="Quinn")]
    assert seqs(rank(hits, question))[0] == 30
    plain = rank(hits, question, weights=Weights(adjusted=False))
    assert seqs(plain)[0] != 30  # the adjustment is what moved it


def test_a_chain_follows_its_first_turn() -> None:
    head = turn(5, "Delia is my sister, the one with the farm")
    chain = [turn(300, "Saw the photos, Delia got a rabbit, tiny"),
             turn(400, "The rabbit is called Noodle, she posts videos"),
             turn(500, "Noodle came from a breeder in Bergen")]
    order = [head, *fillers(100, 12), *chain]
    out = kept_together(order, "Where was the animal Rosalind's sister adopted born?")
    assert seqs(out)[:4] == [5, 300, 400, 500]
    assert sorted(seqs(out)) == sorted(seqs(order))  # nothing lost, nothing doubled


def test_only_rare_words_that_the_question_does_not_hold_link() -> None:
    head = turn(5, "Delia is my sister, the one with the farm")
    common = [turn(200 + i, f"the farm shop sells {w}")
              for i, w in enumerate(("eggs", "milk", "jam")[:RARE])]
    asked = turn(300, "My sister bought a boat")
    order = [head, *fillers(100, 5), *common, asked]
    out = seqs(kept_together(order, "Which boat did my sister buy?"))
    # "farm" is held by more than RARE candidates, "sister" is the question's word.
    assert out == seqs(order)
