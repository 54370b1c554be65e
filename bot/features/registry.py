"""The features, one line each, and everything assembled from their manifests: the command
table every platform renders (``COMMANDS``: the core commands of ``bot.commands`` and the
features'), the storage roles (``ROLES``, composed on the memory store, migrated, copied by
``copy-db`` and written by ``export``), the ``/config`` keys (``CONFIG_KEYS``), and the running
features (``start``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.channels.config import Key
from bot.commands.declare import Registry
from bot.commands.registry import discover
from bot.features import notes
from bot.features.manifest import Feature, Needs
from bot.features.runtime import RunningFeatures
from bot.stores import Storage
from bot.stores.roles import Role
from memory.models import ChannelKey
from memory.tokens import Tokenizer

__all__ = ["COMMANDS", "CONFIG_KEYS", "FEATURES", "ROLES", "start"]

FEATURES: tuple[Feature, ...] = (
    notes.FEATURE,
)
"""Every feature, in the order their hooks run."""

COMMANDS: Registry = discover(extra=[(f.order, f"bot.features.{f.name}", f.commands)
                                     for f in FEATURES])
ROLES: tuple[Role, ...] = tuple(f.role for f in FEATURES if f.role is not None)
CONFIG_KEYS: tuple[Key, ...] = tuple(k for f in FEATURES for k in f.config_keys)


def start(storage: Storage, tokenizer: Tokenizer,
          setting: Callable[[ChannelKey, str], Awaitable[str]]) -> RunningFeatures:
    """The running features on ``storage`` (composed with ``ROLES``), not started yet."""
    running = []
    for f in FEATURES:
        if f.build is not None:
            store = storage.role(f.role.name) if f.role is not None else None
            running.append(f.build(Needs(store, tokenizer, setting)))
    return RunningFeatures(running, tokenizer)
