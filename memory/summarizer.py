"""The summarizer: fold turns into the rolling summary, check the answer, keep identifiers.

One compaction:

1. ``build_summary_request`` (``memory.summary_prompt``) writes the rules and the data:
   the previous summary, the carried facts relevant to the folded turns (bounded,
   ``memory.ledger``) and the new messages, in fenced sections.
2. ``check_answer`` strips ``<think>`` blocks and raises ``SummaryRejected`` on an empty
   or error-like answer or a non-answer (``memory.non_answer``), so neither is ever
   stored; an answer over the bound is
   trimmed (``memory.summary_fit``), never rejected (docs/decisions/0006). Model
   exceptions and timeouts propagate unchanged.
3. Identifiers the answer lost (``memory.ledger.required_identifiers``) that the folded
   turns say are asked for once more, in a small request of their own
   (``build_retry_request``: the first answer, the turns that mention them, the list);
   whatever is still missing, and what only the previous summary had, is carried
   verbatim as a ``CarriedIdentifier`` (docs/decisions/0030).
4. The same answer carries the archive (``summary_prompt.split_answer``): an episode and
   new long-term facts, cut out *before* the checks. A missing or garbled episode never
   fails the compaction (an extractive line stands in); bad fact lines are dropped.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memory.completion import ChatMessage, SummaryModel, SummaryRoute, SummaryRouter
from memory.errors import SummaryRejected
from memory.extractive import content_sentence
from memory.identifiers import (
    contains_identifier,
    context_for,
    extract_identifiers,
    mentioned_in,
    split_sentences,
)
from memory.ledger import (
    CARRIED_TOKENS,
    facts_for_request,
    own_identifiers,
    required_identifiers,
    spoken_identifiers,
)
from memory.models import CarriedIdentifier, LongTermFact, NewLongTermFact, SummaryState, Turn
from memory.models import ChannelKey as Key
from memory.non_answer import non_answer
from memory.search_text import query_terms, terms
from memory.summary_fit import add_to_facts, shorten_summary
from memory.summary_prompt import (
    AnswerParts,
    SummaryRequest,
    build_retry_request,
    build_summary_request,
    format_fact,
    merge_turns,
    parse_summary_request,
    split_answer,
)
from memory.tokens import Tokenizer

__all__ = [
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "build_retry_request",
    "build_summary_request",
    "check_answer",
    "extractive_episode",
    "fold_limit",
    "format_fact",
    "merge_turns",
    "parse_summary_request",
    "retry_identifiers",
]

log = logging.getLogger(__name__)
_ERROR_START = re.compile(
    r"(error\b|i['’]m sorry,? but|i am sorry,? but|sorry, (but )?i can|as an ai\b|"
    r"i can(no|['’])t (help|assist|comply)|\{\s*\"error\")",
    re.IGNORECASE,
)
# Phrases of API error pages; rejected only when the conversation itself does not use them,
# so a channel that discusses rate limits can still be summarized.
_ERROR_MARKERS = (
    "<!doctype html",
    "<html",
    "rate limit",
    "internal server error",
    "context length",
    "bad gateway",
    "service unavailable",
    "too many requests",
    "maximum context",
    "insufficient_quota",
)
_THINK = re.compile(r"<(think(?:ing)?)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_OPEN = re.compile(r"\s*<think(?:ing)?>", re.IGNORECASE)
_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_FENCE = re.compile(r"```[\w-]*\n(.*)\n```", re.DOTALL)
ARCHIVE_TOKENS = 400
"""Extra answer room for the episode and new-facts blocks of a compaction."""
EPISODE_TOKENS = 120
MAX_NEW_FACTS = 12
MAX_FACT_CHARS = 300
KNOWN_TOKENS = 150
"""Most tokens of known long-term facts one compaction request shows."""
DIGEST_CONTEXT_CHARS = 100
"""Context shown after an identifier ``/summary`` puts back."""


def answer_room(bound: int) -> int:
    """The ``max_tokens`` to ask for an answer bounded by ``bound`` (gistbot's count).

    A quarter more (at least 32 tokens): a server counts in its own tokenizer, and an answer
    that runs over is trimmed at a sentence boundary, so the margin only has to cover the
    difference between tokenizers, not a whole second summary.
    """
    return bound + max(bound // 4, 32)


FOLD_MARGIN = 64
"""Tokens of slack in ``fold_limit`` for section headers and a language line (~40)."""


def fold_limit(context_tokens: int, summary_tokens: int, tokenizer: Tokenizer) -> int:
    """Most tokens of turns (labels counted) one compaction may fold so that its request
    and the answer it asks for fit a model context of ``context_tokens``: the context less
    the answer's room, the instructions, the previous summary, the carried and the known
    facts a request shows at most. Never below a quarter of the summary bound."""
    rules = build_summary_request("", [], [], max_tokens=summary_tokens, archive=True)
    fixed = sum(tokenizer.count(m["content"]) + 4 for m in rules)
    answer = answer_room(summary_tokens) + ARCHIVE_TOKENS
    left = context_tokens - answer - fixed - summary_tokens - CARRIED_TOKENS - KNOWN_TOKENS
    return max(left - FOLD_MARGIN, summary_tokens // 4, 1)


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A checked summary plus the facts to upsert (identifiers it dropped, facts mentioned
    again with a newer ``last_seen_seq``), the model calls spent and what stayed missing."""

    text: str
    facts: tuple[CarriedIdentifier, ...]
    calls: int
    missing_after_retry: tuple[str, ...]
    episode: str = ""
    new_facts: tuple[NewLongTermFact, ...] = ()
    episode_fallback: bool = False
    unstated: tuple[str, ...] = ()
    """Of ``missing_after_retry``, those no folded turn states: the previous summary alone
    had them, so their carried fact knows neither the turn nor the speaker."""


def check_answer(
    raw: str, *, max_tokens: int | None, tokenizer: Tokenizer, source: str = ""
) -> str:
    """The answer without ``<think>`` blocks, or ``SummaryRejected`` saying why it is junk.

    ``source`` is the text that was summarized: an error phrase that the conversation itself
    uses ("we hit the rate limit") is not a sign of an error page. Over ``max_tokens`` is
    rejected too; ``None`` leaves the length to the caller (the summarizer trims instead).
    """
    text = _THINK.sub("", raw)
    text = _CLOSE.split(text)[-1]  # some chat templates put the opening tag in the prompt
    text = "" if _OPEN.match(text) else text.strip()  # ran out of tokens while thinking
    fenced = _FENCE.fullmatch(text)
    text = fenced[1].strip() if fenced else text
    if not text:
        raise SummaryRejected("empty answer")
    if _ERROR_START.match(text):
        raise SummaryRejected(f"error-like answer: {text[:80]!r}")
    low, src = text.casefold(), source.casefold()
    for marker in _ERROR_MARKERS:
        if marker in low and marker not in src:
            raise SummaryRejected(f"error-like answer (mentions {marker!r}): {text[:80]!r}")
    if max_tokens is not None and (tokens := tokenizer.count(text)) > max_tokens:
        raise SummaryRejected(f"answer has {tokens} tokens, over the bound of {max_tokens}")
    return text


def _carried_facts(
    previous: SummaryState, turns: Sequence[Turn], missing: Sequence[str]
) -> tuple[CarriedIdentifier, ...]:
    """Facts to upsert: old facts mentioned again (newer ``last_seen_seq``), then the
    identifiers the summary lost, with the sentence (and speaker) they came from: the
    latest person's who said it (one only the bot said is not kept at all)."""
    out: dict[str, CarriedIdentifier] = {}
    in_fold = mentioned_in("\n".join(t.text for t in turns))
    for fact in previous.facts:
        if not in_fold(fact.value):  # most are not: one check on the whole fold first
            continue
        seqs = [t.seq for t in turns if contains_identifier(t.text, fact.value)]
        if seqs:
            out[fact.value] = replace(fact, last_seen_seq=max(fact.last_seen_seq, *seqs))
    old = {f.value: f for f in previous.facts}
    for ident in missing:
        mentions = [t for t in turns if contains_identifier(t.text, ident)]
        if mentions:
            # The context is a person's sentence when one said it: the bot's recap ("To
            # recap: ORD-1042 …") restates it, and a weak model's may garble it.
            said = next((t for t in reversed(mentions) if t.role != "assistant"), mentions[-1])
            fact = CarriedIdentifier(
                ident,
                f"{said.author_name or said.author_id}: {context_for(ident, said.text)}",
                mentions[0].seq,
                mentions[-1].seq,
            )
        else:
            fact = CarriedIdentifier(
                ident,
                context_for(ident, previous.text),
                previous.folded_through,
                previous.folded_through,
            )
        if (known := out.get(ident, old.get(ident))) is not None:
            fact = replace(
                fact,
                first_seq=min(fact.first_seq, known.first_seq),
                last_seen_seq=max(fact.last_seen_seq, known.last_seen_seq),
            )
        out[ident] = fact
    return tuple(out.values())


def retry_identifiers(missing: Sequence[str], turns: Sequence[Turn]) -> list[str]:
    """Of the identifiers a first answer lost, those worth a second model call: the ones
    the folded ``turns`` say. The others came from the previous summary, which a summary at
    its bound lets go to make room for the new messages; asked for again, it would drop
    something else. They are carried verbatim as facts at once (docs/decisions/0030)."""
    if not missing:
        return []
    said = mentioned_in("\n".join(t.text for t in turns))
    return [i for i in missing if said(i)]


def extractive_episode(turns: Sequence[Turn], *, max_tokens: int, tokenizer: Tokenizer) -> str:
    """The stand-in episode when the model wrote none: each speaker's first content sentence
    (greetings and thanks skipped, ``memory.extractive.is_courtesy``), in order, within
    ``max_tokens`` (works on CJK: ``split_sentences`` needs no spaces). A conversation of
    nothing but courtesy gives each speaker's first sentence."""
    names = list(dict.fromkeys(t.author_name for t in turns if t.author_name))
    picked: dict[str, str] = {}
    fallback: dict[str, str] = {}
    for turn in turns:
        who = turn.author_name or turn.author_id or turn.role
        sentences = [x.strip() for x in split_sentences(turn.text) if x.strip()]
        if sentences:
            fallback.setdefault(who, sentences[0])
        if who not in picked and (content := content_sentence(turn.text, names)) is not None:
            picked[who] = content.strip()
    chosen = picked or fallback
    text = " / ".join(f"{who}: {s}" for who, s in chosen.items()) or "(no text)"
    if tokenizer.count(text) > max_tokens:
        text = tokenizer.truncate(text, max_tokens - 1).rstrip() + "…"
    return text


def _source_seqs(fact: str, turns: Sequence[Turn]) -> tuple[int, ...]:
    """The (up to three) folded turns sharing the most search terms with ``fact``."""
    wanted = set(query_terms(fact))
    scored = []
    for turn in turns:
        overlap = len(wanted & set(terms(turn.text).split()))
        if overlap:
            scored.append((-overlap, turn.seq))
    best = sorted(scored)[:3]
    return tuple(sorted(seq for _, seq in best)) or (turns[-1].seq,)


def _new_facts(
    parts: AnswerParts, turns: Sequence[Turn], known: Sequence[LongTermFact]
) -> tuple[NewLongTermFact, ...]:
    offered = {f.id for f in known}
    out: list[NewLongTermFact] = []
    for replaced, text in parts.facts[:MAX_NEW_FACTS]:
        text = text[:MAX_FACT_CHARS].strip()
        if not text or _ERROR_START.match(text):
            continue
        out.append(
            NewLongTermFact(
                text,
                _source_seqs(text, turns),
                supersedes=replaced if replaced in offered else None,
            )
        )
    return tuple(out)


class Summarizer:
    """Writes checked summaries with a ``SummaryModel``; stateless between calls.

    The model may answer ``answer_room(bound)`` tokens (a quarter over the bound, for
    tokenizer differences) plus room for the archive blocks; a summary over the bound is
    trimmed (``memory.summary_fit``). ``timeout`` applies to each model call.
    """

    def __init__(
        self,
        model: SummaryModel,
        tokenizer: Tokenizer,
        *,
        summary_tokens: int = 600,
        timeout: float | None = 120.0,
        language_hint: str | None = None,
        router: SummaryRouter | None = None,
    ) -> None:
        if summary_tokens < 1:
            raise ValueError("summary_tokens must be positive")
        self.model = model
        self.tokenizer = tokenizer
        self.summary_tokens = summary_tokens
        self.timeout = timeout
        self.language_hint = language_hint
        self.router = router

    async def route(self, key: Key | None) -> SummaryRoute:
        """``key``'s model and language: the router's, if any (``SummaryRoute``)."""
        if key is None or self.router is None:
            return SummaryRoute(self.model)
        return await self.router(key)

    async def _ask(self, messages: list[ChatMessage], purpose: str, bound: int, extra: int = 0,
                   model: SummaryModel | None = None) -> str:
        async with asyncio.timeout(self.timeout):
            answer = await (model or self.model).complete(
                messages, max_tokens=answer_room(bound) + extra, purpose=purpose
            )
        return answer.text

    def _checked(self, answer: str, bound: int, source: str, turns: Sequence[Turn]) -> str:
        """A junk-free answer within ``bound``: junk and non-answers (``memory.non_answer``)
        raise, over-long is trimmed."""
        text = check_answer(answer, max_tokens=None, tokenizer=self.tokenizer, source=source)
        if (why := non_answer(text, source, turns)) is not None:
            raise SummaryRejected(f"non-answer, {why}: {text[:80]!r}")
        short = shorten_summary(text, bound, self.tokenizer)
        if short != text:
            log.info("summary answer over its bound of %d tokens: trimmed", bound)
        return short

    def _known(self, known_facts: Sequence[LongTermFact]) -> list[tuple[int, str]]:
        """The known facts a request offers for replacement, within ``KNOWN_TOKENS``."""
        out: list[tuple[int, str]] = []
        used = 0
        for fact in known_facts:
            cost = self.tokenizer.count(fact.text) + 4
            if used + cost > KNOWN_TOKENS:
                break
            out.append((fact.id, fact.text))
            used += cost
        return out

    async def summarize(
        self,
        previous: SummaryState,
        turns: Sequence[Turn],
        *,
        known_facts: Sequence[LongTermFact] = (), key: Key | None = None,
    ) -> SummaryResult:
        """Fold ``turns`` into ``previous``; see the module docstring for the steps.

        ``known_facts`` are current long-term facts the model may mark as replaced.
        Raises ``SummaryRejected`` for a junk first answer; the model's own exceptions and
        ``TimeoutError`` propagate. The retry is best effort: if it fails or is junk, the
        first answer stands and the lost identifiers are carried as facts. The result's
        ``facts`` are only those to upsert: carried facts not shown to the model stay in
        the ledger as they are.
        """
        if not turns:
            raise ValueError("summarize() needs at least one turn to fold")
        bound = self.summary_tokens
        route = await self.route(key)
        known = self._known(known_facts)
        source = "\n".join(
            [previous.text, *map(format_fact, previous.facts), *(t.text for t in turns)]
        )
        parts = await self._first_answer(previous, turns, known, route)
        text = self._checked(parts.summary, bound, source, turns)
        required = required_identifiers(previous.text, previous.facts, turns, max_tokens=bound)
        text, missing, calls = await self._recover_identifiers(
            text, required, turns, source, route
        )
        episode, fallback = self._episode(parts, turns)
        offered = {i for i, _ in known}
        shown = [f for f in known_facts if f.id in offered]
        stated = set(retry_identifiers(missing, turns))
        return SummaryResult(
            text,
            _carried_facts(previous, turns, missing),
            calls,
            tuple(missing),
            episode=episode,
            new_facts=_new_facts(parts, turns, shown),
            episode_fallback=fallback,
            unstated=tuple(i for i in missing if i not in stated),
        )

    async def _first_answer(
        self,
        previous: SummaryState,
        turns: Sequence[Turn],
        known: list[tuple[int, str]],
        route: SummaryRoute,
    ) -> AnswerParts:
        """The model's answer to the full request, the archive blocks cut apart (step 1)."""
        messages = build_summary_request(
            previous.text,
            facts_for_request(previous.facts, turns, self.tokenizer),
            turns,
            max_tokens=self.summary_tokens,
            language_hint=self.language_hint,
            language=route.language,
            archive=True,
            known_facts=known,
        )
        answer = await self._ask(messages, "summary", self.summary_tokens,
                                 extra=ARCHIVE_TOKENS, model=route.model)
        return split_answer(answer)

    async def _recover_identifiers(
        self,
        text: str,
        required: Sequence[str],
        turns: Sequence[Turn],
        source: str,
        route: SummaryRoute,
    ) -> tuple[str, list[str], int]:
        """``text`` with lost identifiers asked for once more (step 3): the summary kept,
        the identifiers it still lacks, and how many model calls were made.

        The retry is best effort: a failed or junk retry, or one that loses more than it
        recovers, leaves the first answer standing.
        """
        bound = self.summary_tokens
        missing = [i for i in required if not contains_identifier(text, i)]
        asked = retry_identifiers(missing, turns)
        if not asked:
            return text, missing, 1
        mentions = [t for t in turns if any(contains_identifier(t.text, i) for i in asked)]
        retry = build_retry_request(text, mentions, asked, max_tokens=bound,
                                    language_hint=self.language_hint,
                                    language=route.language)
        try:
            again = await self._ask(retry, "summary", bound, model=route.model)
            # Not asked for the archive blocks again; any it wrote are not the summary.
            second = self._checked(split_answer(again).summary, bound, source, turns)
        except Exception as exc:  # best effort; CancelledError still propagates
            log.warning("summary retry failed, keeping the first answer: %r", exc)
        else:
            still = [i for i in required if not contains_identifier(second, i)]
            if len(still) <= len(missing):
                return second, still, 2
        return text, missing, 2

    def _episode(self, parts: AnswerParts, turns: Sequence[Turn]) -> tuple[str, bool]:
        """The episode to archive (step 4), and whether it is the extractive stand-in
        because the model's was missing or garbled (far longer than asked)."""
        episode = parts.episode
        if episode is not None and self.tokenizer.count(episode) <= EPISODE_TOKENS * 2:
            return episode, False
        return extractive_episode(turns, max_tokens=EPISODE_TOKENS, tokenizer=self.tokenizer), True

    async def digest(self, state: SummaryState, turns: Sequence[Turn], *, max_tokens: int,
                     key: Key | None = None) -> str:
        """The summary brought up to date with ``turns``, for ``/summary``; nothing is stored.

        Same checks as ``summarize`` (``SummaryRejected`` on junk; an over-long answer is
        trimmed to ``max_tokens``) and no retry: instead, every identifier of the stored
        summary, the carried facts and the users' recent turns that the answer lacks is
        appended under its facts section, with what it referred to, so ``/summary`` shows
        all that the memory holds.
        """
        route = await self.route(key)
        messages = build_summary_request(
            state.text,
            facts_for_request(state.facts, turns, self.tokenizer),
            turns,
            max_tokens=max_tokens,
            digest=True,
            language_hint=self.language_hint,
            language=route.language,
        )
        source = "\n".join([state.text, *map(format_fact, state.facts), *(t.text for t in turns)])
        text = self._checked(
            await self._ask(messages, "digest", max_tokens, model=route.model), max_tokens, source,
            turns)
        return add_to_facts(text, _lost_lines(text, state, turns, max_tokens))


def _short(context: str) -> str:
    if len(context) <= DIGEST_CONTEXT_CHARS:
        return context
    return context[: DIGEST_CONTEXT_CHARS - 1].rstrip() + "…"


def _lost_lines(text: str, state: SummaryState, turns: Sequence[Turn], bound: int) -> list[str]:
    """``- identifier — context`` for each identifier the digest ``text`` lacks: of the
    stored summary (not gistbot's prompt text), the carried facts, the users' turns."""
    lines: dict[str, str] = {}
    own = own_identifiers(bound)
    for ident in extract_identifiers(state.text):
        if ident not in own:
            lines.setdefault(ident, _short(context_for(ident, state.text)))
    for fact in state.facts:
        lines.setdefault(fact.value, _short(fact.context))
    for ident in spoken_identifiers(turns, [state.text, *(f.value for f in state.facts)]):
        mentions = [t for t in turns if contains_identifier(t.text, ident)]
        latest = ([t for t in mentions if t.role != "assistant"] or mentions)[-1]
        who = latest.author_name or latest.author_id
        lines.setdefault(ident, f"{who}: {_short(context_for(ident, latest.text))}")
    return [
        f"- {ident} — {context}" if context else f"- {ident}"
        for ident, context in lines.items()
        if not contains_identifier(text, ident)
    ]
