"""``PostgresStore``'s archive: episodes and long-term facts, each row with a ``search``
tsvector of ``c<channel id>`` and its terms, so a query ANDs its channel's token inside the
GIN index and never ranks another channel's rows. Functions run on one connection, inside
the transaction the store opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.models import ChannelKey, Episode, LongTermFact, NewLongTermFact, Recall
from memory.stores.common import (
    ArchiveCopy,
    EpisodeRow,
    LongTermFactRow,
    channel_token,
    stored_fact,
)
from memory.stores.postgres import queries
from memory.stores.postgres.queries import (
    Conn,
    by_key,
    insert_channel_fact,
    insert_episode,
    locked_channel,
)
from memory.stores.postgres.turn_search import or_tsquery

__all__ = [
    "add_fact",
    "delete_fact",
    "episodes",
    "list_facts",
    "replace_archive",
    "search",
]


def _channel_fact(key: ChannelKey, row: Sequence[Any]) -> LongTermFact:
    return LongTermFactRow(*row).channel_fact(key)


def _episode(key: ChannelKey, row: Sequence[Any]) -> Episode:
    return EpisodeRow(*row).episode(key)


def tsquery(cid: int, query: Sequence[str]) -> str:
    """``'c<id>' & ('a' | 'b')``; terms are letters and digits only (``search_text``), and
    quotes are doubled anyway, so none is an operator."""
    return f"'{channel_token(cid)}' & ({or_tsquery(query)})"


# ---------------------------------------------------------------------------- writes


async def add_fact(conn: Conn, key: ChannelKey, fact: NewLongTermFact, now: float) -> LongTermFact:
    """Store one fact (``/remember``); creates the channel if needed."""
    await conn.execute(queries.CREATE_CHANNEL, *by_key(key))
    cid = int(await conn.fetchval(queries.CHANNEL_ID, *by_key(key)))
    return stored_fact(key, await insert_channel_fact(conn, cid, fact, now), fact, now)


async def delete_fact(conn: Conn, key: ChannelKey, fact_id: int) -> LongTermFact | None:
    """Delete one fact of this channel; None if the channel has no such fact."""
    cid = await conn.fetchval(queries.CHANNEL_ID, *by_key(key))
    if cid is None:
        return None
    row = await conn.fetchrow(queries.DELETE_CHANNEL_FACT, fact_id, cid)
    return None if row is None else _channel_fact(key, row)


async def replace_archive(
    conn: Conn, key: ChannelKey, episodes: Sequence[Episode], facts: Sequence[LongTermFact]
) -> None:
    """Set the channel's episodes and facts to copies (see ``common.ArchiveCopy``)."""
    cid, plan = await locked_channel(conn, key), ArchiveCopy.of(episodes, facts)
    await conn.execute(queries.RESET_EPISODES, cid)
    await conn.execute(queries.RESET_CHANNEL_FACTS, cid)
    for episode in plan.episodes:
        await insert_episode(conn, cid, episode)
    copied = {c.source_id: await insert_channel_fact(conn, cid, c.fact, c.created_at)
              for c in plan.facts}
    for newer, older in plan.supersede(copied):
        await conn.execute(queries.SUPERSEDE, newer, older, cid)


# ---------------------------------------------------------------------------- reads


async def list_facts(conn: Conn, key: ChannelKey, include_superseded: bool, limit: int
                     ) -> list[LongTermFact]:
    """The channel's facts, newest first."""
    cid = await conn.fetchval(queries.CHANNEL_ID, *by_key(key))
    if cid is None:
        return []
    rows = await conn.fetch(queries.LIST_CHANNEL_FACTS, cid, include_superseded, limit)
    return [_channel_fact(key, r) for r in rows]


async def episodes(conn: Conn, key: ChannelKey, limit: int) -> list[Episode]:
    """The channel's newest episodes, newest first."""
    cid = await conn.fetchval(queries.CHANNEL_ID, *by_key(key))
    if cid is None:
        return []
    return [_episode(key, r) for r in await conn.fetch(queries.LIST_EPISODES, cid, limit)]


async def search(
    conn: Conn, key: ChannelKey, query: Sequence[str], facts_limit: int, episodes_limit: int,
    include_superseded: bool,
) -> Recall:
    """Full-text search (GIN, ``ts_rank``) over this channel's facts and episodes."""
    cid = await conn.fetchval(queries.CHANNEL_ID, *by_key(key))
    if cid is None:
        return Recall()
    tsq = tsquery(int(cid), query)
    facts = await conn.fetch(queries.SEARCH_CHANNEL_FACTS, cid, tsq, facts_limit,
                             include_superseded)
    found = await conn.fetch(queries.SEARCH_EPISODES, cid, tsq, episodes_limit)
    return Recall(tuple(_channel_fact(key, r) for r in facts),
                  tuple(_episode(key, r) for r in found))
