"""Whether a summarizer's answer is a non-answer: text that passes for a summary but
says nothing of what it was asked to summarize.

Three signs, each a rejection (``SummaryRejected``; ``/summary`` then shows the stored
summary and says so, compaction keeps the old state and retries; docs/decisions/0022):

* **nothing of the conversation**: not one search term (``memory.search_text``) of the
  answer is one of the summarized text's or a speaker's name;
* **the instructions echoed**: it carries the request's own markers (``<<<NEW
  MESSAGES>>>``, ``Token limit:``) or its rules' opening line;
* **one message copied**: several messages were to be summarized and the answer, its
  speaker label aside, is a piece of one of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.models import Turn
from memory.search_text import content_terms

__all__ = ["COPY_MIN_TURNS", "non_answer"]

COPY_MIN_TURNS = 3
"""Messages a request must fold before an answer that merely repeats one is rejected
(summarizing one or two short messages may well repeat one)."""
_ECHOES = ("<<<", "token limit:", "you keep the memory of a group chat",
           "output only the summary")
_LABEL = re.compile(r"""^\s*["'“]?\s*(?:\[[^\]\n]{1,80}\]|[^\s:"'\[\]]{1,40})\s*:\s*""")


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def non_answer(text: str, source: str, turns: Sequence[Turn]) -> str | None:
    """Why ``text`` (a checked answer, ``<think>`` removed) is no summary of ``source``
    (what was summarized: previous summary, carried facts, ``turns``), or None."""
    low, said = _fold(text), _fold(source)
    for echo in _ECHOES:
        if echo in low and echo not in said:
            return f"it repeats the request's instructions ({echo!r})"
    # The speakers' names count: a summary in the channel's set language, or of small
    # talk, may share nothing else with the messages ("Ana and Ivo greeted each other").
    wanted = content_terms(source) | content_terms(" ".join(t.author_name for t in turns))
    if wanted and not (content_terms(text) & wanted):
        return "it shares no word with the conversation"
    if len(turns) >= COPY_MIN_TURNS:
        bare = _fold(_LABEL.sub("", text, count=1)).strip(" \"'”…")
        if len(bare) >= 8 and any(bare in _fold(t.text) for t in turns):
            return "it copies one message instead of summarizing"
    return None

