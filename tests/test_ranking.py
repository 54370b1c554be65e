"""The fused ranking of recalled turns (``memory.ranking``): the lexical order moved by the
conversation window around the best hits, the speakers the question names, turns that say
something particular, and recency; the bot's replies stay after people's messages."""

from __future__ import annotations

import itertools
from pathlib import Path

from bot.app import Runtime
from bot.conversation.prompts import FENCE_CLOSE, FENCE_OPEN
from bot.messages import IncomingMessage
from bot.settings import load_settings
from memory.models import ChannelKey, Turn
from memory.ranking import Ranked, Weights, fuse, named_speakers, rank
from tests.fakes.models import ArchiveModel
from tests.harness.chat import ask

KEY = ChannelKey("test", "w1", "rank")
FILLER = "we talked about the weather again today"  # the same words: no turn is specific
ONLY_LEXICAL = Weights(speaker=0, author=0, window=0, specific=0, recency=0, adjusted=False)


def turn(seq: int, text: str = FILLER, who: str = "Alice", role: str = "user") -> Turn:
    return Turn(key=KEY, seq=seq, message_id=f"m{seq}", role=role, author_id=who.lower(),
                author_name=who, text=text, tokens=len(text.split()), sent_at=1e9 + seq * 60)


def asking(text: str, who: str = "Quinn") -> list[Turn]:
    return [turn(10_000, text, who)]


def seqs(turns: list[Turn]) -> list[int]:
    return [t.seq for t in turns]


def test_a_weaker_hit_beside_the_best_one_by_the_same_speaker_is_ranked_in() -> None:
    # Lexical order: the best hit (seq 100, Alice), then eight scattered hits, then the turn
    # right after the best hit, said by Alice too.
    hits = [turn(100), *(turn(s, who="Bob") for s in range(10, 90, 10)), turn(101)]
    ranked = rank(hits, asking("what about the weather?"))
    assert ranked.index(hits[-1]) < ranked.index(hits[5])
    # The window is what moved it: lexical order alone keeps it last.
    assert seqs(rank(hits, asking("what about the weather?"), weights=ONLY_LEXICAL))[-1] == 101


def test_the_window_takes_only_the_speakers_around_the_hit() -> None:
    hits = [turn(100), *(turn(s, who="Bob") for s in range(10, 90, 10)),
            turn(102, who="Carol")]
    ranked = rank(hits, asking("what about the weather?"),
                  weights=Weights(speaker=0, author=0, specific=0, recency=0))
    assert seqs(ranked)[-1] == 102  # Carol said nothing beside Alice's hit


def test_a_named_speakers_turn_outranks_better_lexical_hits_of_others() -> None:
    hits = [*(turn(s, who="Max") for s in range(10, 60, 10)), turn(5, who="Evan")]
    ranked = rank(hits, asking("What did Evan call his new dog?"))
    assert ranked[0].author_name == "Evan"
    assert named_speakers("What did Evan call his new dog?", hits) == {"evan"}
    assert named_speakers("What about the dog?", hits) == set()


def test_without_a_name_the_askers_own_turns_are_preferred() -> None:
    hits = [*(turn(s, who="Max") for s in range(10, 40, 10)), turn(5, who="Evan")]
    assert rank(hits, asking("what was my order?", who="Evan"))[0].author_name == "Evan"
    assert rank(hits, asking("what was my order?", who="Quinn"))[0].author_name == "Max"


def test_a_turn_that_says_something_particular_comes_before_repeated_chatter() -> None:
    hits = [*(turn(s) for s in range(10, 60, 10)),
            turn(5, "we finally adopted a beagle puppy and named him Mochi")]
    ranked = rank(hits, asking("what about the weather?"))
    assert seqs(ranked)[-1] != 5  # above the chatter that ranked just before it
    assert seqs(rank(hits, asking("what about the weather?"), weights=ONLY_LEXICAL))[-1] == 5


def test_recency_breaks_ties() -> None:
    a, b = turn(10), turn(20)
    assert seqs(fuse([Ranked([a, b], 1.0), Ranked([b, a], 1.0)])) == [20, 10]
    assert seqs(fuse([Ranked([a, b], 1.0), Ranked([b, a], 1.0)], k=1)) == [20, 10]
    assert seqs(fuse([Ranked([a, b], 1.0), Ranked([b, a], 0.5)])) == [10, 20]  # not a tie


def test_a_bot_reply_never_outranks_a_persons_turn() -> None:
    bot = turn(101, "Mochi Mochi beagle puppy named adopted", who="gistbot", role="assistant")
    hits = [bot, *(turn(s, who="Evan") for s in range(10, 100, 10))]
    ranked = rank(hits, asking("What did Evan call his new dog?"))
    assert ranked[-1] is bot
    assert named_speakers("gistbot, what did you say?", hits) == set()


def test_another_ranked_list_is_fused_in() -> None:
    hits = [turn(s) for s in range(10, 60, 10)]
    semantic = turn(3, "we named our puppy Mochi")
    ranked = rank(hits, asking("what about the weather?"), extra=[Ranked([semantic], 10.0)])
    assert ranked[0] is semantic and len(ranked) == len(hits) + 1


def test_a_zero_weight_leaves_a_list_out() -> None:
    a, b = turn(10), turn(20)
    assert seqs(fuse([Ranked([a], 1.0), Ranked([b], 0.0)])) == [10]


_ids = itertools.count()


def _msg(text: str, who: str, at: float, ask: bool = False) -> IncomingMessage:
    return IncomingMessage(KEY, f"t{next(_ids)}", who.lower(), who, text, at, mentions_bot=ask)


async def test_a_paraphrased_question_recalls_the_named_speakers_answer(tmp_path: Path) -> None:
    """The answer shares no word with the question but its speaker's name; forty turns of
    the other speaker hold the question's "dog". A small recall room shows the answer."""
    model = ArchiveModel()
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path}/rank.db",
                              "LLM_PROVIDER": "offline", "MAX_HISTORY_MESSAGES": "10",
                              "RECALL_TOKENS": "400"})
    topics = ["weather", "lunch", "football", "music", "movies", "coffee", "trains", "work"]
    pairs = list(itertools.product(topics, topics))
    async with Runtime.open(settings, llm=model) as rt:  # type: ignore[arg-type]
        at = 1e9
        for i in range(60):
            a, b = pairs[i]
            at += 60
            await ask(rt, _msg(f"I like {a} and {b} a lot", "Evan", at))
            if i == 30:
                at += 60
                await ask(
                    rt, _msg("We finally adopted a beagle puppy, we named him Mochi!", "Evan", at))
            if i < 40:
                at += 60
                await ask(rt, _msg(f"the dog near the {b} and {a}", "Max", at))
            await rt.memory.wait_idle()
        for i in range(12):  # the recent window: far from the answer
            at += 60
            await ask(rt, _msg(f"more {topics[i % 8]} talk", "Max", at))
        await rt.memory.wait_idle()
        reply = await ask(
            rt, _msg("What did Evan call his new dog?", "Quinn", at + 86_400, ask=True))
        assert reply is not None
        prompt = model.prompts[-1]
        memory = prompt[prompt.index(FENCE_OPEN):prompt.index(FENCE_CLOSE)]
        assert "dog near the" in memory  # the lexical matches are recalled too
        assert "named him Mochi" in memory, memory
