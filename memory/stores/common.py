"""What both store backends share: rows mapped into the models, the outcome of an edit or
delete, the plan of an archive copy, TTL guards and the terms the search index holds.

Each row class names the columns of one ``SELECT`` in the order both backends select
them (``columns`` builds that list), so a row is read by name, never by position.
Nothing here touches a connection: the backends run the SQL, this decides what it means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple

from memory.errors import SchemaTooNewError
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    ChannelStats,
    Episode,
    LongTermFact,
    NewEpisode,
    NewLongTermFact,
    NewTurn,
    RecordResult,
    Role,
    SummaryState,
    Turn,
)
from memory.search_text import terms
from memory.store import ChangeOutcome

__all__ = [
    "CHANNEL_FACT_COLS",
    "COMMON_TURN_DOCS",
    "EPISODE_COLS",
    "FACT_COLS",
    "HEADER_COLS",
    "NO_UPPER_SEQ",
    "TURN_COLS",
    "TURN_QUERY_TERMS",
    "TURN_TERMS_CHARS",
    "ArchiveCopy",
    "ChannelHeader",
    "EpisodeRow",
    "FactCopy",
    "FactRow",
    "LongTermFactRow",
    "StatsRow",
    "TierOrder",
    "TurnEdit",
    "TurnPosition",
    "TurnRow",
    "TurnTier",
    "applied_change",
    "bound_docs",
    "channel_token",
    "columns",
    "episode_terms",
    "fact_terms",
    "fact_values",
    "merge_turn_tiers",
    "pick_turn_terms",
    "positive_ttl",
    "recorded",
    "refused_change",
    "schema_too_new",
    "stored_fact",
    "turn_seqs",
    "turn_terms",
    "turn_tiers",
    "wants_search",
    "with_pending",
]

NO_UPPER_SEQ = 2**62
"""The upper seq bound of a snapshot that was not given ``through_seq``."""


def columns(fields: Sequence[str], prefix: str = "") -> str:
    """``"a, b, c"`` (or ``"t.a, t.b, t.c"`` with ``prefix="t."``) for a ``SELECT``."""
    return ", ".join(prefix + f for f in fields)


class TurnRow(NamedTuple):
    """The stored columns of a turn, in ``TURN_COLS`` order."""

    seq: int
    message_id: str
    role: Role
    author_id: str
    author_name: str
    text: str
    tokens: int
    sent_at: float

    @classmethod
    def of(cls, turn: Turn) -> TurnRow:
        """The values to insert for ``turn``."""
        return cls(turn.seq, turn.message_id, turn.role, turn.author_id, turn.author_name,
                   turn.text, turn.tokens, turn.sent_at)

    def turn(self, key: ChannelKey) -> Turn:
        """The ``Turn`` this row stores."""
        return Turn(key, int(self.seq), self.message_id, self.role, self.author_id,
                    self.author_name, self.text, int(self.tokens), float(self.sent_at))


TURN_COLS = columns(TurnRow._fields)


def recorded(turn: NewTurn, seq: int, folded_through: int) -> tuple[Turn, RecordResult]:
    """The turn ``record`` stores at ``seq``, and what it answers (``pending_hint`` is
    ``seq - folded_through``, read in the same statement that took the seq)."""
    stored = Turn(turn.key, int(seq), turn.message_id, turn.role, turn.author_id,
                  turn.author_name, turn.text, turn.tokens, turn.sent_at)
    return stored, RecordResult(stored, created=True, pending_hint=int(seq) - int(folded_through))


def with_pending(result: RecordResult, size: Sequence[Any]) -> RecordResult:
    """``result`` with the unfolded turns' (count, tokens) read in the insert's transaction."""
    return replace(result, pending=(int(size[0]), int(size[1])))


class ChannelHeader(NamedTuple):
    """A channel row's summary state, in ``HEADER_COLS`` order."""

    id: int
    summary: str
    version: int
    folded_through: int
    last_compacted_at: float | None
    compactions: int

    def state(self, key: ChannelKey, facts: Iterable[CarriedIdentifier]) -> SummaryState:
        """The ``SummaryState`` of this header with the carried ``facts``."""
        return SummaryState(key, self.summary, int(self.version), int(self.folded_through),
                            self.last_compacted_at, int(self.compactions), tuple(facts))


HEADER_COLS = columns(ChannelHeader._fields)


class FactRow(NamedTuple):
    """A carried identifier (table ``facts``), in ``FACT_COLS`` order."""

    value: str
    context: str
    first_seq: int
    last_seen_seq: int

    def fact(self) -> CarriedIdentifier:
        """The ``CarriedIdentifier`` this row stores."""
        return CarriedIdentifier(
            self.value, self.context, int(self.first_seq), int(self.last_seen_seq)
        )


FACT_COLS = columns(FactRow._fields)


def fact_values(channel_id: int, facts: Iterable[CarriedIdentifier]) -> list[tuple[Any, ...]]:
    """``(channel_id, value, context, first_seq, last_seen_seq)`` per fact, to insert."""
    return [(channel_id, f.value, f.context, f.first_seq, f.last_seen_seq) for f in facts]


class EpisodeRow(NamedTuple):
    """An archived episode, in ``EPISODE_COLS`` order; ``speakers`` decoded by the backend."""

    id: int
    first_seq: int
    last_seq: int
    started_at: float
    ended_at: float
    speakers: Sequence[str]
    text: str

    def episode(self, key: ChannelKey) -> Episode:
        """The ``Episode`` this row stores."""
        return Episode(key, int(self.id), int(self.first_seq), int(self.last_seq),
                       float(self.started_at), float(self.ended_at), tuple(self.speakers),
                       self.text)


EPISODE_COLS = columns(EpisodeRow._fields)


class LongTermFactRow(NamedTuple):
    """A long-term fact (table ``memory_facts``), in ``CHANNEL_FACT_COLS`` order;
    ``source_seqs`` decoded by the backend."""

    id: int
    text: str
    source_seqs: Sequence[int]
    author: str
    pinned: bool
    created_at: float
    superseded_by: int | None

    def channel_fact(self, key: ChannelKey) -> LongTermFact:
        """The ``LongTermFact`` this row stores."""
        by = None if self.superseded_by is None else int(self.superseded_by)
        seqs = tuple(int(x) for x in self.source_seqs)
        return LongTermFact(key, int(self.id), self.text, seqs, self.author, bool(self.pinned),
                           float(self.created_at), by)


CHANNEL_FACT_COLS = columns(LongTermFactRow._fields)


def stored_fact(key: ChannelKey, fact_id: int, fact: NewLongTermFact, now: float) -> LongTermFact:
    """The ``LongTermFact`` that ``add_fact`` stored as ``fact_id``."""
    return LongTermFact(key, fact_id, fact.text, fact.source_seqs, fact.author, fact.pinned, now)


class StatsRow(NamedTuple):
    """A channel's counts, in the order the backends select them."""

    turns: int
    pending: int
    pending_tokens: int
    facts: int
    compactions: int
    last_compacted_at: float | None
    version: int

    def stats(self, key: ChannelKey) -> ChannelStats:
        """The ``ChannelStats``: folded turns are the stored ones not pending."""
        return ChannelStats(key, int(self.turns), int(self.turns) - int(self.pending),
                            int(self.pending), int(self.pending_tokens), 0, int(self.facts),
                            int(self.compactions), self.last_compacted_at, int(self.version))


# ---------------------------------------------------------------------------- edit / delete


class TurnPosition(NamedTuple):
    """Where an edited or deleted turn stands: its seq and its channel's fold pointer."""

    seq: int
    folded_through: int


@dataclass(frozen=True, slots=True)
class TurnEdit:
    """The new text of an edited turn (a delete passes None instead)."""

    text: str
    tokens: int


def refused_change(found: TurnPosition | None) -> ChangeOutcome | None:
    """Why an edit or delete leaves the turn alone (``missing``: no such channel or turn;
    ``folded``: already in the summary), or None when it goes ahead."""
    if found is None:
        return "missing"
    if found.seq <= found.folded_through:
        return "folded"
    return None


def applied_change(edit: TurnEdit | None) -> ChangeOutcome:
    """The outcome of a change that went ahead (it also bumped the channel's version: an
    in-flight compaction may have read the old text, and its commit must fail)."""
    return "deleted" if edit is None else "updated"


# ---------------------------------------------------------------------------- archive


@dataclass(frozen=True, slots=True)
class FactCopy:
    """One long-term fact to copy: the source id, the fact, its original time."""

    source_id: int
    fact: NewLongTermFact
    created_at: float


@dataclass(frozen=True, slots=True)
class ArchiveCopy:
    """How ``replace_archive`` writes copies: episodes and facts in their source id order
    (the target assigns new ids), then ``superseded_by`` links re-pointed to the copies."""

    episodes: tuple[NewEpisode, ...]
    facts: tuple[FactCopy, ...]
    links: tuple[tuple[int, int], ...]
    """(source id of a fact, source id of the fact that superseded it)."""

    @classmethod
    def of(cls, episodes: Iterable[Episode], facts: Sequence[LongTermFact]) -> ArchiveCopy:
        """The plan for copying these episodes and facts."""
        new_episodes = tuple(
            NewEpisode(e.first_seq, e.last_seq, e.started_at, e.ended_at, e.speakers, e.text)
            for e in sorted(episodes, key=lambda e: e.id)
        )
        copies = tuple(
            FactCopy(f.id, NewLongTermFact(f.text, f.source_seqs, f.author, f.pinned), f.created_at)
            for f in sorted(facts, key=lambda f: f.id)
        )
        links = tuple((f.id, f.superseded_by) for f in facts if f.superseded_by is not None)
        return cls(new_episodes, copies, links)

    def supersede(self, copied: Mapping[int, int]) -> list[tuple[int, int]]:
        """(new id of the superseding copy, new id of the superseded copy) per link whose
        both ends were copied; ``copied`` maps source ids to new ids."""
        return [(copied[by], copied[fid]) for fid, by in self.links if by in copied]


def channel_token(channel_id: int) -> str:
    """``c<id>``: the token an index row carries so a search stays inside its channel."""
    return f"c{channel_id}"


def episode_terms(episode: NewEpisode) -> str:
    """What the search index holds for an episode: its text and speakers."""
    return terms(" ".join([episode.text, *episode.speakers]))


def fact_terms(fact: NewLongTermFact) -> str:
    """What the search index holds for a long-term fact."""
    return terms(fact.text)


TURN_QUERY_TERMS = 8
"""Most terms one turn search uses, the rarest first (``pick_turn_terms``)."""
COMMON_TURN_DOCS = 2_000
"""A term in more of the channel's turns than this is left out of a turn search (BM25
would score every one of them on each reply, and a word that common tells turns apart
less than the rarer terms beside it). PostgreSQL's; SQLite has its own
(``sqlite.turn_search.COMMON_DOCS``)."""
TURN_TERMS_CHARS = 100_000
"""The indexed form of one turn is cut here: a PostgreSQL tsvector must stay under 1 MB,
and a message longer than this (tens of thousands of words) is found by its beginning."""


def turn_terms(text: str, author: str = "") -> str:
    """What the search index holds for a turn (both backends index exactly this): its
    speaker's name and its text, so "what did Melanie say about …" matches Melanie's
    turns (speaker match) as well as the words."""
    indexed = terms(f"{author} {text}" if author else text)
    if len(indexed) > TURN_TERMS_CHARS:
        indexed = indexed[:TURN_TERMS_CHARS].rsplit(" ", 1)[0]
    return indexed


def pick_turn_terms(query: Sequence[str], docs: Mapping[str, int], searched: int | None = None,
                    bound: int | None = None) -> list[str]:
    """The query terms a turn search uses: those that occur (``docs``: term -> how many
    stored turns hold it, 0 or missing when none), not more common than
    ``bound`` (``COMMON_TURN_DOCS``), the rarest ``TURN_QUERY_TERMS`` (ties: query order).

    With ``searched`` (how many turns the search covers), also none held by more than
    half of them: BM25 weighs such a term at zero (FTS5 clamps its IDF), so a turn that
    holds only it is no match. In a two-person chat the speaker's name (indexed with the
    text) is in half the turns: as a match it listed every turn of that person, the
    shortest first, ahead of a turn that shares the question's other words. Such terms
    still order the rest (``turn_tiers``)."""
    most = COMMON_TURN_DOCS if bound is None else bound
    useful = [t for t in dict.fromkeys(query) if 0 < docs.get(t, 0) <= most
              and (searched is None or 2 * docs[t] <= searched)]
    return sorted(useful, key=lambda t: docs[t])[:TURN_QUERY_TERMS]


def bound_docs(n: int, max_docs: int | None, bound: int | None = None) -> int:
    """A term's turn count as a search with ``max_docs`` sees it: one over ``bound``
    (``COMMON_TURN_DOCS``; too common, left out of every pass) when more than ``max_docs``
    turns hold it. The follow-up search (``memory.archive``) uses the best match's rarer
    words only (at 1,000,000 turns, all of them cost as much as the search itself)."""
    return n if max_docs is None or n <= max_docs else (
        COMMON_TURN_DOCS if bound is None else bound) + 1


TierOrder = Literal["best", "shortest", "newest"]


class TurnTier(NamedTuple):
    """One pass of a turn search: the turns holding any of ``terms``, in ``order``: best
    (BM25 / ``ts_rank``), shortest (fewest tokens) or newest first; ties: newer first."""

    terms: list[str]
    order: TierOrder


def turn_tiers(first: Sequence[str], query: Sequence[str], fallback: Sequence[str] | None,
               docs: Mapping[str, int], searched: int, bound: int | None = None
               ) -> list[TurnTier]:
    """The passes of a turn search after the first, each filling what the ones before left
    of the limit. The first matches ``first``, the query's telling terms
    (``pick_turn_terms`` with ``searched``), best first; then:

    2. the query's terms held by more than half the searched turns, shortest first: in a
       two-person chat, the name of the person asked about, so that person's messages
       come before anyone's that share only common words; no term tells them apart, so
       the shortest, which cost the recall room least, go first (BM25 with FTS5's clamped
       IDF did the same by accident; docs/decisions/0014);
    3. ``fallback``'s telling terms, best first: the message's every word, common ones
       included (``memory.recall.turn_fallback_query``): BM25 weighs them by rarity, and
       a paraphrase often keeps only those ("at the café" for "at the coffee shop");
    4. any of ``fallback``'s terms, newest first: what no term orders, recency does.

    ``fallback`` None means the query itself; a pass over the terms of an earlier one is
    left out (it would find nothing new). ``docs`` must count every term of ``fallback``."""
    rest = list(dict.fromkeys(query if fallback is None else fallback))
    weak = [t for t in pick_turn_terms(query, docs, None, bound) if 2 * docs[t] > searched]
    seen = [set(first)]
    out: list[TurnTier] = []
    for tier in (TurnTier(weak, "shortest"),
                 TurnTier(pick_turn_terms(rest, docs, searched, bound), "best"),
                 TurnTier(pick_turn_terms(rest, docs, None, bound), "newest")):
        if tier.terms and set(tier.terms) not in seen:
            seen.append(set(tier.terms))
            out.append(tier)
    return out


def merge_turn_tiers(first: Sequence[int], second: Iterable[int], limit: int) -> list[int]:
    """``first``, then the ids of ``second`` not in it, at most ``limit`` in all."""
    out = list(first[:limit])
    seen = set(out)
    for x in second:
        if len(out) >= limit:
            break
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def turn_seqs(seqs: Iterable[int]) -> list[int]:
    """Distinct positive seqs, ascending (what ``turns_at`` looks up)."""
    return sorted({int(s) for s in seqs if int(s) > 0})


def wants_search(query: Sequence[str], facts_limit: int, episodes_limit: int) -> bool:
    """Whether a search can find anything: some terms and room for some results."""
    return bool(query) and (facts_limit > 0 or episodes_limit > 0)


# ---------------------------------------------------------------------------- guards


def positive_ttl(ttl: float) -> float:
    """``ttl`` as a float; a lease or claim that expires at once is a caller's mistake."""
    if ttl <= 0:
        raise ValueError("ttl must be positive")
    return float(ttl)


def schema_too_new(current: int, known: int) -> SchemaTooNewError:
    """The refusal to open a database a newer gistbot migrated."""
    return SchemaTooNewError(
        f"this database has schema version {current}, but this gistbot knows only "
        f"up to {known}; upgrade gistbot or use another DATABASE_URL"
    )
