"""Per-channel settings and daily token usage as the stores keep them.

A setting row belongs to a *scope*: a channel (``ChannelKey``) or a whole server/workspace,
written as the same key with ``channel == SERVER`` (""). Values are strings; what a name
means and which values are valid is the application's business (``bot.channel_config``):
``memory/`` only keeps them, logs every change (``SettingChange``) and bumps one global
``settings_version`` in the same transaction, so every replica can notice a change by
polling one integer.

Token usage is counted per UTC day and ``UsageKey`` (a user of a server, or the server
itself with ``user == SERVER``); ``add_tokens`` is an atomic increment, so replicas
sharing one database count together. Each count is also kept per *kind* (what the tokens
were spent on, a short name the application chooses); the total is what limits apply to.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.models import ChannelKey

__all__ = ["SERVER", "Setting", "SettingChange", "UsageKey", "server_scope"]

SERVER = ""
"""The ``channel`` (or ``user``) of a server-wide scope or account."""


def server_scope(key: ChannelKey) -> ChannelKey:
    """The server/workspace scope that ``key``'s channel belongs to."""
    return ChannelKey(key.platform, key.workspace, SERVER)


@dataclass(frozen=True, slots=True)
class Setting:
    """One stored value: ``name`` = ``value`` in ``scope``, and who set it when."""

    scope: ChannelKey
    name: str
    value: str
    updated_by: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class SettingChange:
    """One logged change; ``value`` None means the setting was removed (unset)."""

    scope: ChannelKey
    name: str
    value: str | None
    actor: str
    at: float


@dataclass(frozen=True, slots=True)
class UsageKey:
    """Whose tokens: ``user`` of (``platform``, ``workspace``), or the server (``SERVER``)."""

    platform: str
    workspace: str
    user: str = SERVER
