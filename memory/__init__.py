"""gistbot's memory: a rolling summary plus recent turns per channel, and an archive.

Where to start reading: ``manager`` (the facade ``bot/`` uses), ``compaction`` (when a
summary is written and why nothing is lost), ``archive`` (episodes, long-term facts,
recall, retention). The store backends are not imported here: SQLite is chosen at
start-up and PostgreSQL needs the optional ``asyncpg``.
"""

from __future__ import annotations

from memory.completion import ChatMessage, SummaryModel
from memory.config import MemoryConfig
from memory.errors import (
    MemoryError_,
    SchemaTooNewError,
    StoreBusyError,
    StoreError,
    StoreOpenError,
    SummaryRejected,
)
from memory.manager import Digest, MemoryManager
from memory.models import (
    CarriedIdentifier,
    ChannelKey,
    ChannelStats,
    Episode,
    LongTermFact,
    MemoryView,
    NewEpisode,
    NewLongTermFact,
    NewTurn,
    Recall,
    RecordResult,
    SummaryState,
    Turn,
)
from memory.store import (
    ArchiveStore,
    ChangeOutcome,
    LeaseStore,
    Lifecycle,
    MemoryStore,
    PortingStore,
    ResetResult,
    Store,
)
from memory.summarizer import Summarizer
from memory.tokens import TokenCounter, Tokenizer
from memory.window import WindowPolicy

__all__ = [
    "ArchiveStore",
    "CarriedIdentifier",
    "ChangeOutcome",
    "ChannelKey",
    "ChannelStats",
    "ChatMessage",
    "Digest",
    "Episode",
    "LeaseStore",
    "Lifecycle",
    "LongTermFact",
    "MemoryConfig",
    "MemoryError_",
    "MemoryManager",
    "MemoryStore",
    "MemoryView",
    "NewEpisode",
    "NewLongTermFact",
    "NewTurn",
    "PortingStore",
    "Recall",
    "RecordResult",
    "ResetResult",
    "SchemaTooNewError",
    "Store",
    "StoreBusyError",
    "StoreError",
    "StoreOpenError",
    "Summarizer",
    "SummaryModel",
    "SummaryRejected",
    "SummaryState",
    "TokenCounter",
    "Tokenizer",
    "Turn",
    "WindowPolicy",
]
