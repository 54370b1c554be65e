"""The offline summarizer: keep the sentences that matter, verbatim, within the bound.

``OfflineLLM`` has no model, so its summaries are extractive: of
every message it keeps the sentences that carry identifiers (numbers, ids, URLs, …),
decisions, questions and people (names, @mentions, honorifics, preferences), plus the first
other content sentence as the message's topic, each prefixed with its speaker, under the
same sections a real model writes. Courtesy lines ("Thanks, Caroline!", "haha see you",
"good morning!", 감사합니다, 안녕하세요, ありがとう) are never items (``is_courtesy``): a
greeting that names the other speaker used to count as "people" and outlive the content.
Copying sentences verbatim means identifiers survive by construction, and nothing depends
on spaces or capital letters, so Korean and Japanese work (keywords include 하기로, 결정,
決定, ことに, ですか …).

Merging with the previous summary: its items come first, then the new ones. Over the bound,
items leave in this order: filler topics, then other items, then items carrying identifiers,
oldest first within each tier. The result never exceeds ``max_tokens`` and is not empty
while there is anything to summarize (the summarizer rejects empty answers). Deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory.identifiers import context_for, extract_identifiers, split_sentences
from memory.tokens import Tokenizer

__all__ = ["SECTIONS", "content_sentence", "extractive_summary", "is_courtesy"]

SECTIONS = (
    "Topics",
    "Facts and identifiers",
    "Decisions",
    "Open requests",
    "People and preferences",
)
_TOPICS, _FACTS, _DECISIONS, _REQUESTS, _PEOPLE = range(len(SECTIONS))
_FILLER, _PLAIN, _IDENT = range(3)  # drop tiers: lower leaves first
_MAX_ITEM_CHARS = 300
_DECISION = re.compile(
    r"(?i)\b(?:decid\w*|agree[ds]?|will|won't|we'll|i'll|let's|let us|going to|plan(?:ned)? "
    r"to|settled|approved?|confirmed?|deadline)\b|결정|하기로|합의|확정|할게|하겠|예정|"
    r"決定|決め|ことに|にします|しましょう|予定|合意"
)
_QUESTION_END = re.compile(
    r"(?:[?？]|까요?|나요|가요|는지요|니|냐|죠|ですか|ますか|でしょうか|かな|か)$"
)
_TRAILING = " \t.。!！~…)]」』\"'"
_PEOPLE_RE = re.compile(
    r"(?i)@\w+|\b(?:prefers?|preferred|likes?|loves?|hates?|favou?rite|allergic|call me|"
    r"my name)\b|\S님|\S\s씨|좋아|싫어|선호|취향|さん|様|くん|ちゃん|好き|嫌い|好み|苦手"
)


# Courtesy words and phrases; a sentence made only of these, names and punctuation is chit-chat.
_COURTESY = re.compile(
    r"(?i)\b(?:thanks?(?: you)?|thank u|thx|ty|tysm|hi+|hello|hey+|hiya|yo|howdy|"
    r"good (?:morning|afternoon|evening|night|luck|job)|gm|gn|morning|bye+|goodbye|"
    r"see (?:you|ya)|cya|later|soon|tomorrow|haha\w*|hehe\w*|lol\w*|lmao|rofl|ok(?:ay)?|k|"
    r"sure|cool|nice|great|awesome|amazing|congrats|congratulations|welcome|you'?re welcome|"
    r"no problem|np|you too|take care|cheers|omg|wow|yay|yes|yeah|yep|nope|sounds good|"
    r"got it|noted|all|everyone|guys|folks|there|so|much|a lot|again|really|very|too|dear|"
    r"mate|buddy|friend|friends|oh|ah|aw+|hmm+|and|for|you|it|that|have a good (?:one|day)|"
    r"(?:good|nice|great|glad) to (?:see|meet|hear from) you|long time no see|how are you|"
    r"how'?s it going|what'?s up)\b"
    r"|감사합니다|감사해요|감사|고맙습니다|고마워요|고마워|안녕하세요|안녕히|안녕|반갑습니다|"
    r"반가워요|수고하셨습니다|수고하세요|수고|넵|네|예|알겠습니다|좋아요|좋네요|굿|ㅋ+|ㅎ+|ㅠ+|ㅜ+|"
    r"ありがとうございます|ありがとう|こんにちは|こんばんは|おはようございます|おはよう|"
    r"お疲れ様です|お疲れさまです|お疲れ様|よろしくお願いします|よろしく|了解しました|"
    r"承知しました|わかりました|了解です|了解|はい|おやすみ|またね|님|씨|さん"
)


def is_courtesy(sentence: str, names: Sequence[str] = ()) -> bool:
    """Whether ``sentence`` is only courtesy: greetings, thanks, laughter, ok, the names of
    the people in the conversation ("Thanks, Caroline!", "지영님 감사합니다")."""
    if extract_identifiers(sentence):
        return False
    rest = sentence
    for name in sorted((n for n in names if n.strip()), key=len, reverse=True):
        rest = re.sub(re.escape(name), " ", rest, flags=re.IGNORECASE)
    stripped = _COURTESY.sub(" ", rest)
    if sum(c.isalnum() for c in stripped) < 3:
        return True
    # "Hey Mel!": a greeting plus one capitalised word, a name the speakers list lacks.
    words = re.findall(r"\w+", stripped)
    return stripped != rest and len(words) == 1 and words[0][:1].isupper()


def content_sentence(text: str, names: Sequence[str] = ()) -> str | None:
    """The first sentence of ``text`` that is not courtesy, or None."""
    return next((s for s in split_sentences(text) if not is_courtesy(s, names)), None)


@dataclass(frozen=True, slots=True)
class _Item:
    section: int
    text: str
    tier: int
    order: int


def _mentions(sentence: str, name: str) -> bool:
    """Whether ``sentence`` names ``name``; an ASCII name must stand alone ("Al" ≠ "also")."""
    edge = r"(?<![A-Za-z0-9_])" if name[:1].isascii() else ""
    tail = r"(?![A-Za-z0-9_])" if name[-1:].isascii() else ""
    return re.search(edge + re.escape(name) + tail, sentence, re.IGNORECASE) is not None


def _classify(sentence: str, others: Sequence[str]) -> tuple[int, int] | None:
    """(section, tier) of a sentence worth keeping, or None."""
    if extract_identifiers(sentence):
        return _FACTS, _IDENT
    if _DECISION.search(sentence):
        return _DECISIONS, _PLAIN
    if _QUESTION_END.search(sentence.rstrip(_TRAILING) or sentence):
        return _REQUESTS, _PLAIN
    if _PEOPLE_RE.search(sentence) or any(_mentions(sentence, name) for name in others):
        return _PEOPLE, _PLAIN
    return None


def _shorten(sentence: str) -> str:
    """Cap a sentence, keeping the window around its first identifier if it has one."""
    if len(sentence) <= _MAX_ITEM_CHARS:
        return sentence
    idents = extract_identifiers(sentence)
    if idents:
        return context_for(idents[0], sentence, _MAX_ITEM_CHARS) or sentence[:_MAX_ITEM_CHARS]
    return sentence[: _MAX_ITEM_CHARS - 1] + "…"


def _previous_items(previous: str) -> list[_Item]:
    """Items of a previous summary, in its sections when it uses ours (else Topics)."""
    by_title = {title.casefold(): i for i, title in enumerate(SECTIONS)}
    section, items = _TOPICS, list[_Item]()
    for line in previous.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#"):
            section = by_title.get(stripped.lstrip("#").strip().casefold(), _TOPICS)
            continue
        bullet = re.match(r"[-*•]\s+(.*)", stripped)
        for text in [bullet[1]] if bullet else split_sentences(stripped):
            plain = _FILLER if section == _TOPICS else _PLAIN
            tier = _IDENT if extract_identifiers(text) else plain
            items.append(_Item(section, _shorten(" ".join(text.split())), tier, len(items)))
    return items


def _new_items(blocks: Sequence[tuple[str, str]], start: int) -> list[_Item]:
    names = [name for name, _ in blocks if len(name.strip()) >= 2]
    items: list[_Item] = []
    for author, text in blocks:
        others = [n for n in names if n != author]
        topic = True  # the first content sentence stands for an otherwise plain message
        for sentence in split_sentences(text):
            if is_courtesy(sentence, [*names, author]):
                continue
            kind = _classify(sentence, others)
            if kind is None and topic and sum(c.isalnum() for c in sentence) >= 3:
                kind = (_TOPICS, _FILLER)
            topic = False
            if kind is not None:
                line = f"{author}: {_shorten(' '.join(sentence.split()))}"
                items.append(_Item(kind[0], line, kind[1], start + len(items)))
    if not items:  # only chit-chat: keep the last word rather than return nothing
        for author, text in reversed(blocks):
            if sentences := split_sentences(text):
                return [_Item(_TOPICS, f"{author}: {_shorten(sentences[0])}", _FILLER, start)]
    return items


def _render(items: Sequence[_Item]) -> str:
    parts: list[str] = []
    for section, title in enumerate(SECTIONS):
        lines = [
            f"- {it.text}" for it in sorted(items, key=lambda x: x.order) if it.section == section
        ]
        if lines:
            parts.append("\n".join([f"## {title}", *lines]))
    return "\n\n".join(parts)


def _fit(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """Cut ``text`` to the bound; a re-encoded cut can count differently, so loop."""
    budget = max_tokens
    while budget > 0 and tokenizer.count(text) > max_tokens:
        text = tokenizer.truncate(text, budget).rstrip()
        budget -= 1
    return text if tokenizer.count(text) <= max_tokens else ""


def extractive_summary(
    previous: str,
    facts: list[str],
    blocks: list[tuple[str, str]],
    *,
    max_tokens: int,
    tokenizer: Tokenizer,
) -> str:
    """A sectioned summary of ``previous`` plus ``blocks`` ((author, text)), within
    ``max_tokens`` as counted by ``tokenizer``.

    ``facts`` are accepted to mirror the request but not repeated: the store carries them
    and the reply prompt shows them beside the summary, so repeating them spends budget twice.
    """
    del facts
    if max_tokens <= 0:
        return ""
    old = _previous_items(previous)
    seen: set[str] = set()
    items: list[_Item] = []
    for item in [*old, *_new_items(blocks, len(old))]:
        if item.text not in seen:
            seen.add(item.text)
            items.append(item)
    if not items:
        return ""
    drop_order = sorted(range(len(items)), key=lambda i: (items[i].tier, items[i].order))
    keep = set(range(len(items)))
    costs = [tokenizer.count(f"- {it.text}") + 1 for it in items]

    def estimate() -> int:  # per-line counts add up to about the rendered count
        return sum(costs[i] for i in keep) + 6 * len({items[i].section for i in keep})

    dropped = 0
    while keep and estimate() > max_tokens:  # cheap first pass
        keep.discard(drop_order[dropped])
        dropped += 1
    while keep:  # exact pass
        text = _render([items[i] for i in sorted(keep)])
        if tokenizer.count(text) <= max_tokens:
            return text
        keep.discard(drop_order[dropped])
        dropped += 1
    # Not even one whole item fits: cut the one that would have been dropped last.
    return _fit(_render([items[drop_order[-1]]]), max_tokens, tokenizer)
